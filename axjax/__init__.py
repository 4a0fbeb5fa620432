"""axjax: typesafe named-axis deep learning on JAX.

Every tensor's type names what each axis means (``Tensor[F32, Batch, Pixel]``); axis
mistakes are type errors for mypy/pyright and clear ``AxisError``s at trace time.

The packages, each importing only those below it: ``axjax.core`` (axes, dtypes, Tensor,
Op), ``axjax.ops`` (the primitive ops), ``axjax.graph`` (nodes, compile, fold/scan),
``axjax.nn`` (layers), ``axjax.train`` (losses, the loop, checkpoints, data). Their public
names are re-exported here; ``ax.nn`` and ``ax.train`` keep their own namespaces.

Example:
    >>> import axjax as ax
    >>> from typing import final
    >>> @final
    ... class Batch(ax.Axis): ...
    >>> ax.ones((2,), Batch) + ax.ones((2,), Batch)
    Tensor[F32, Batch=2]([2., 2.])
"""

__version__ = "0.2.0"

from . import nn as nn
from . import train as train
from .core import BF16 as BF16
from .core import F16 as F16
from .core import F32 as F32
from .core import F64 as F64
from .core import I8 as I8
from .core import I32 as I32
from .core import I64 as I64
from .core import U8 as U8
from .core import U32 as U32
from .core import AnyTensor as AnyTensor
from .core import Axis as Axis
from .core import AxisError as AxisError
from .core import AxisRules as AxisRules
from .core import Bool as Bool
from .core import DType as DType
from .core import ElementwiseOp as ElementwiseOp
from .core import FloatElementwiseOp as FloatElementwiseOp
from .core import Floating as Floating
from .core import Integer as Integer
from .core import Matrix as Matrix
from .core import NonFiniteError as NonFiniteError
from .core import NonFiniteReport as NonFiniteReport
from .core import Op as Op
from .core import OptionalDependencyWarning as OptionalDependencyWarning
from .core import ReductionOp as ReductionOp
from .core import Scalar as Scalar
from .core import Tensor as Tensor
from .core import TensorType as TensorType
from .core import TransformError as TransformError
from .core import Vector as Vector
from .core import abstract as abstract
from .core import all_gather as all_gather
from .core import axis_rules as axis_rules
from .core import check_axes as check_axes
from .core import check_finite as check_finite
from .core import config as config
from .core import debug_nans as debug_nans
from .core import grad as grad
from .core import jax_autodiff as jax_autodiff
from .core import partition_spec as partition_spec
from .core import pmean as pmean
from .core import psum as psum
from .core import shard as shard
from .core import sharded_init as sharded_init
from .core import sharding as sharding
from .core import value_and_grad as value_and_grad
from .core import vmap as vmap
from .graph import Apply as Apply
from .graph import CompiledGraph as CompiledGraph
from .graph import Const as Const
from .graph import Graph as Graph
from .graph import GraphGrad as GraphGrad
from .graph import Input as Input
from .graph import Loop as Loop
from .graph import MultiApply as MultiApply
from .graph import Node as Node
from .graph import Param as Param
from .graph import Part as Part
from .graph import as_params as as_params
from .graph import as_values as as_values
from .graph import compile as compile
from .graph import fold as fold
from .graph import graph_grad as graph_grad
from .graph import scan as scan
from .ops import Contract as Contract
from .ops import Conv as Conv
from .ops import MatMul as MatMul
from .ops import Pool as Pool
from .ops import abs as abs
from .ops import add as add
from .ops import arange as arange
from .ops import argmax as argmax
from .ops import astype as astype
from .ops import avg_pool as avg_pool
from .ops import broadcast as broadcast
from .ops import concat as concat
from .ops import contract as contract
from .ops import conv as conv
from .ops import cos as cos
from .ops import divide as divide
from .ops import equal as equal
from .ops import erf as erf
from .ops import exp as exp
from .ops import expand_dims as expand_dims
from .ops import expm1 as expm1
from .ops import flatten as flatten
from .ops import full as full
from .ops import gelu as gelu
from .ops import greater as greater
from .ops import greater_equal as greater_equal
from .ops import index as index
from .ops import less as less
from .ops import less_equal as less_equal
from .ops import log as log
from .ops import log1p as log1p
from .ops import log_softmax as log_softmax
from .ops import logsumexp as logsumexp
from .ops import matmul as matmul
from .ops import max as max
from .ops import max_pool as max_pool
from .ops import maximum as maximum
from .ops import mean as mean
from .ops import min as min
from .ops import minimum as minimum
from .ops import multiply as multiply
from .ops import negative as negative
from .ops import normal as normal
from .ops import not_equal as not_equal
from .ops import one_hot as one_hot
from .ops import ones as ones
from .ops import power as power
from .ops import randint as randint
from .ops import reciprocal as reciprocal
from .ops import relu as relu
from .ops import rename as rename
from .ops import rsqrt as rsqrt
from .ops import sigmoid as sigmoid
from .ops import silu as silu
from .ops import sin as sin
from .ops import slice as slice
from .ops import softmax as softmax
from .ops import softplus as softplus
from .ops import sqrt as sqrt
from .ops import square as square
from .ops import squeeze as squeeze
from .ops import stack as stack
from .ops import subtract as subtract
from .ops import sum as sum
from .ops import take as take
from .ops import tanh as tanh
from .ops import tensor as tensor
from .ops import tile as tile
from .ops import transpose as transpose
from .ops import unflatten as unflatten
from .ops import uniform as uniform
from .ops import unstack as unstack
from .ops import var as var
from .ops import where as where
from .ops import zeros as zeros
from .train import GraphStep as GraphStep
from .train import compile_step as compile_step
