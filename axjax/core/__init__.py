"""axjax core: axes, dtypes, Tensor, Op and its lowering, the primitive ops."""

from ._axis import Axis as Axis
from ._construct import (
    arange as arange,
    full as full,
    normal as normal,
    ones as ones,
    randint as randint,
    tensor as tensor,
    uniform as uniform,
    zeros as zeros,
)
from ._contract import Contract as Contract, MatMul as MatMul, contract as contract, matmul as matmul
from ._dtype import (
    BF16 as BF16,
    F16 as F16,
    F32 as F32,
    F64 as F64,
    I8 as I8,
    I32 as I32,
    I64 as I64,
    U8 as U8,
    U32 as U32,
    Bool as Bool,
    DType as DType,
)
from ._elementwise import (
    abs as abs,
    add as add,
    astype as astype,
    cos as cos,
    divide as divide,
    equal as equal,
    erf as erf,
    exp as exp,
    expm1 as expm1,
    gelu as gelu,
    greater as greater,
    greater_equal as greater_equal,
    less as less,
    less_equal as less_equal,
    log as log,
    log1p as log1p,
    maximum as maximum,
    minimum as minimum,
    multiply as multiply,
    negative as negative,
    not_equal as not_equal,
    power as power,
    reciprocal as reciprocal,
    relu as relu,
    rsqrt as rsqrt,
    sigmoid as sigmoid,
    silu as silu,
    sin as sin,
    softplus as softplus,
    sqrt as sqrt,
    square as square,
    subtract as subtract,
    tanh as tanh,
    where as where,
)
from ._errors import AxisError as AxisError
from ._op import Op as Op, config as config, jax_autodiff as jax_autodiff
from ._reduce import (
    argmax as argmax,
    log_softmax as log_softmax,
    logsumexp as logsumexp,
    max as max,
    mean as mean,
    min as min,
    softmax as softmax,
    sum as sum,
    var as var,
)
from ._select import index as index, one_hot as one_hot, slice_ as slice, take as take
from ._shape import (
    broadcast as broadcast,
    concat as concat,
    expand_dims as expand_dims,
    flatten as flatten,
    rename as rename,
    squeeze as squeeze,
    stack as stack,
    tile as tile,
    transpose as transpose,
    unflatten as unflatten,
)
from ._tensor import (
    AnyTensor as AnyTensor,
    Matrix as Matrix,
    Scalar as Scalar,
    Tensor as Tensor,
    TensorType as TensorType,
    Vector as Vector,
)
from ._transforms import grad as grad, value_and_grad as value_and_grad, vmap as vmap
