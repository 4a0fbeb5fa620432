"""axjax core: axes, dtypes, Tensor, Op and its lowering, the primitive ops."""

from ._axis import Axis as Axis
from ._check_axes import check_axes as check_axes
from ._compile import CompiledGraph as CompiledGraph
from ._compile import compile as compile
from ._contract import Contract as Contract
from ._contract import MatMul as MatMul
from ._contract import contract as contract
from ._contract import matmul as matmul
from ._conv import Conv as Conv
from ._conv import conv as conv
from ._dtype import (
    BF16 as BF16,
)
from ._dtype import (
    F16 as F16,
)
from ._dtype import (
    F32 as F32,
)
from ._dtype import (
    F64 as F64,
)
from ._dtype import (
    I8 as I8,
)
from ._dtype import (
    I32 as I32,
)
from ._dtype import (
    I64 as I64,
)
from ._dtype import (
    U8 as U8,
)
from ._dtype import (
    U32 as U32,
)
from ._dtype import (
    Bool as Bool,
)
from ._dtype import (
    DType as DType,
)
from ._elementwise import (
    abs as abs,
)
from ._elementwise import (
    astype as astype,
)
from ._elementwise import (
    cos as cos,
)
from ._elementwise import (
    erf as erf,
)
from ._elementwise import (
    exp as exp,
)
from ._elementwise import (
    expm1 as expm1,
)
from ._elementwise import (
    gelu as gelu,
)
from ._elementwise import (
    log as log,
)
from ._elementwise import (
    log1p as log1p,
)
from ._elementwise import (
    negative as negative,
)
from ._elementwise import (
    reciprocal as reciprocal,
)
from ._elementwise import (
    relu as relu,
)
from ._elementwise import (
    rsqrt as rsqrt,
)
from ._elementwise import (
    sigmoid as sigmoid,
)
from ._elementwise import (
    silu as silu,
)
from ._elementwise import (
    sin as sin,
)
from ._elementwise import (
    softplus as softplus,
)
from ._elementwise import (
    sqrt as sqrt,
)
from ._elementwise import (
    square as square,
)
from ._elementwise import (
    tanh as tanh,
)
from ._elementwise import (
    where as where,
)
from ._errors import AxisError as AxisError
from ._gen_construct import arange as arange
from ._gen_construct import full as full
from ._gen_construct import normal as normal
from ._gen_construct import ones as ones
from ._gen_construct import randint as randint
from ._gen_construct import tensor as tensor
from ._gen_construct import uniform as uniform
from ._gen_construct import zeros as zeros
from ._gen_elementwise import add as add
from ._gen_elementwise import divide as divide
from ._gen_elementwise import equal as equal
from ._gen_elementwise import greater as greater
from ._gen_elementwise import greater_equal as greater_equal
from ._gen_elementwise import less as less
from ._gen_elementwise import less_equal as less_equal
from ._gen_elementwise import maximum as maximum
from ._gen_elementwise import minimum as minimum
from ._gen_elementwise import multiply as multiply
from ._gen_elementwise import not_equal as not_equal
from ._gen_elementwise import power as power
from ._gen_elementwise import subtract as subtract
from ._gen_reduce import argmax as argmax
from ._gen_reduce import log_softmax as log_softmax
from ._gen_reduce import logsumexp as logsumexp
from ._gen_reduce import max as max
from ._gen_reduce import mean as mean
from ._gen_reduce import min as min
from ._gen_reduce import softmax as softmax
from ._gen_reduce import sum as sum
from ._gen_reduce import var as var
from ._gen_shape import broadcast as broadcast
from ._gen_shape import expand_dims as expand_dims
from ._gen_shape import index as index
from ._gen_shape import one_hot as one_hot
from ._gen_shape import rename as rename
from ._gen_shape import squeeze as squeeze
from ._gen_shape import stack as stack
from ._gen_shape import transpose as transpose
from ._gen_shape import unstack as unstack
from ._graph import Graph as Graph
from ._graph_grad import GraphGrad as GraphGrad
from ._graph_grad import GraphStep as GraphStep
from ._graph_grad import compile_step as compile_step
from ._graph_grad import graph_grad as graph_grad
from ._nodes import Apply as Apply
from ._nodes import Const as Const
from ._nodes import Input as Input
from ._nodes import Loop as Loop
from ._nodes import MultiApply as MultiApply
from ._nodes import Node as Node
from ._nodes import Param as Param
from ._nodes import Part as Part
from ._op import Op as Op
from ._op import config as config
from ._op import jax_autodiff as jax_autodiff
from ._params import as_params as as_params
from ._params import as_values as as_values
from ._pool import Pool as Pool
from ._pool import avg_pool as avg_pool
from ._pool import max_pool as max_pool
from ._select import slice as slice
from ._select import take as take
from ._shape import (
    concat as concat,
)
from ._shape import (
    flatten as flatten,
)
from ._shape import (
    tile as tile,
)
from ._shape import (
    unflatten as unflatten,
)
from ._sharding import partition_spec as partition_spec
from ._tensor import (
    AnyTensor as AnyTensor,
)
from ._tensor import (
    Matrix as Matrix,
)
from ._tensor import (
    Scalar as Scalar,
)
from ._tensor import (
    Tensor as Tensor,
)
from ._tensor import (
    TensorType as TensorType,
)
from ._tensor import (
    Vector as Vector,
)
from ._transforms import grad as grad
from ._transforms import value_and_grad as value_and_grad
from ._transforms import vmap as vmap
