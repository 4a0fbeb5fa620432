"""axjax.nn: layers on named axes, as Equinox modules whose fields are Tensors."""

from typing import TYPE_CHECKING

from ..graph import fold as fold  # defined with the graph's Loop node, re-exported here
from ..graph import scan as scan
from . import init as init
from ._activations import elu as elu
from ._activations import gelu as gelu
from ._activations import identity as identity
from ._activations import leaky_relu as leaky_relu
from ._activations import log_sigmoid as log_sigmoid
from ._activations import log_softmax as log_softmax
from ._activations import relu as relu
from ._activations import sigmoid as sigmoid
from ._activations import silu as silu
from ._activations import softmax as softmax
from ._activations import softplus as softplus
from ._activations import swish as swish
from ._activations import tanh as tanh
from ._adapted import LoRAWeight as LoRAWeight
from ._adapted import Rank as Rank
from ._attention_kernels import dot_product_attention as dot_product_attention
from ._attention_masks import KeyOfAnyQuery as KeyOfAnyQuery
from ._attention_masks import attention_weights as attention_weights
from ._attention_masks import causal_mask as causal_mask
from ._attention_masks import segment_mask as segment_mask
from ._attention_paths import AttentionPath as AttentionPath
from ._attention_paths import compute_capability as compute_capability
from ._attention_paths import cudnn_refusal as cudnn_refusal
from ._attention_paths import default_attention_path as default_attention_path
from ._conv import Conv as Conv
from ._conv import Conv1D as Conv1D
from ._conv import Conv2D as Conv2D
from ._conv import Conv3D as Conv3D
from ._dropout import Dropout as Dropout
from ._embedding import Embedding as Embedding
from ._ensemble import Ensemble as Ensemble
from ._ensemble import Member as Member
from ._ensemble import ensemble_loss as ensemble_loss
from ._export import exportable as exportable
from ._export import is_exportable as is_exportable
from ._fused_attention import FusedAttention as FusedAttention
from ._generate import Decoder as Decoder
from ._generate import generate as generate
from ._gqa import GroupedQueryAttention as GroupedQueryAttention
from ._gqa import GroupHead as GroupHead
from ._gqa import KVHead as KVHead
from ._kv_cache import KVCache as KVCache
from ._linear import MLP as MLP
from ._linear import Affine as Affine
from ._linear import Linear as Linear
from ._lora import LoRA as LoRA
from ._lora import is_lora as is_lora
from ._lora import load_lora as load_lora
from ._lora import lora as lora
from ._lora import merge_lora as merge_lora
from ._lora import save_lora as save_lora
from ._multihead import Head as Head
from ._multihead import HeadDim as HeadDim
from ._multihead import MultiheadAttention as MultiheadAttention
from ._norm import LayerNorm as LayerNorm
from ._norm import RMSNorm as RMSNorm
from ._pool import AvgPool as AvgPool
from ._pool import AvgPool1D as AvgPool1D
from ._pool import AvgPool2D as AvgPool2D
from ._pool import GlobalAvgPool as GlobalAvgPool
from ._pool import GlobalMaxPool as GlobalMaxPool
from ._pool import MaxPool as MaxPool
from ._pool import MaxPool1D as MaxPool1D
from ._pool import MaxPool2D as MaxPool2D
from ._precision import LossScaled as LossScaled
from ._precision import Policy as Policy
from ._precision import cast as cast
from ._precision import scale_gradient as scale_gradient
from ._recurrent import Gate as Gate
from ._recurrent import GRUCell as GRUCell
from ._recurrent import LSTMCell as LSTMCell
from ._recurrent import Prev as Prev
from ._recurrent import RNNCell as RNNCell
from ._remat import Remat as Remat
from ._remat import remat as remat
from ._rope import rope_frequencies as rope_frequencies
from ._rope import rotary_embedding as rotary_embedding
from ._safetensors import SafetensorsError as SafetensorsError
from ._safetensors import load_safetensors as load_safetensors
from ._safetensors import save_safetensors as save_safetensors
from ._select import Selector as Selector
from ._select import by_axes as by_axes
from ._select import by_path as by_path
from ._sequence import Bidirectional as Bidirectional
from ._sequence import Recurrent as Recurrent
from ._sequence import Stacked as Stacked
from ._sequential import Lambda as Lambda
from ._sequential import Sequential as Sequential
from ._stack import Layer as Layer
from ._stack import LayerStack as LayerStack
from ._swiglu import SwiGLU as SwiGLU
from ._tree import Child as Child
from ._tree import ChildSumTreeLSTMCell as ChildSumTreeLSTMCell
from ._tree import Level as Level
from ._tree import Slot as Slot
from ._tree import Tree as Tree
from ._tree import TreeBatch as TreeBatch
from ._tree import TreeNode as TreeNode
from ._tree import tree_fold as tree_fold
from ._tree import tree_scan as tree_scan

if TYPE_CHECKING:  # the deprecated name, typed (the run time warns, below)
    KeyPos = KeyOfAnyQuery


def __getattr__(name: str) -> object:
    """``ax.nn.Node``: the old name of :class:`TreeNode`, and ``ax.nn.KeyPos``, the old name
    of :class:`KeyOfAnyQuery`, kept for one release."""
    if name == "KeyPos":
        import warnings

        warnings.warn(
            "ax.nn.KeyPos is renamed ax.nn.KeyOfAnyQuery (the key of any query, which no "
            "softmax check can tie to its queries); the attention layers' default key axis "
            "is now ax.KeyOf[query_pos]. The old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return KeyOfAnyQuery
    if name == "Node":
        import warnings

        warnings.warn(
            "ax.nn.Node is renamed ax.nn.TreeNode (ax.Node is a graph node); the old "
            "name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return TreeNode
    raise AttributeError(f"module 'axjax.nn' has no attribute {name!r}")
