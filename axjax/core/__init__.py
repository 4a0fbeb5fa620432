"""axjax core: axes, dtypes, errors, ``Tensor``, ``Op`` and its lowering, transforms.

The foundations every other package builds on; it imports none of them (ops, graph, nn,
train). The library's packages take core's helpers from :mod:`axjax.core._internal`.
"""

from ._axis import Axis as Axis
from ._check_axes import check_axes as check_axes
from ._context import config as config
from ._context import jax_autodiff as jax_autodiff
from ._dtype import BF16 as BF16
from ._dtype import F16 as F16
from ._dtype import F32 as F32
from ._dtype import F64 as F64
from ._dtype import I8 as I8
from ._dtype import I32 as I32
from ._dtype import I64 as I64
from ._dtype import U8 as U8
from ._dtype import U32 as U32
from ._dtype import Bool as Bool
from ._dtype import DType as DType
from ._dtype import Floating as Floating
from ._dtype import Integer as Integer
from ._errors import AxisError as AxisError
from ._finite import NonFiniteError as NonFiniteError
from ._finite import NonFiniteReport as NonFiniteReport
from ._finite import check_finite as check_finite
from ._finite import debug_nans as debug_nans
from ._indices import checkify_indices as checkify_indices
from ._interop import ExportAxisError as ExportAxisError
from ._interop import register_export as _register_export
from ._jax_hints import TransformError as TransformError
from ._jax_hints import install_jax_hints as _install_jax_hints
from ._op import Op as Op
from ._optional import OptionalDependencyWarning as OptionalDependencyWarning
from ._roles import KeyOf as KeyOf
from ._roles import Out as Out
from ._tensor import AnyTensor as AnyTensor
from ._tensor import Matrix as Matrix
from ._tensor import Scalar as Scalar
from ._tensor import Tensor as Tensor
from ._tensor import Vector as Vector
from ._tensor_type import TensorType as TensorType
from ._transforms import grad as grad
from ._transforms import value_and_grad as value_and_grad
from ._transforms import vmap as vmap
from ._typed_ops import ElementwiseOp as ElementwiseOp
from ._typed_ops import FloatElementwiseOp as FloatElementwiseOp
from ._typed_ops import FloatReductionOp as FloatReductionOp
from ._typed_ops import ReductionOp as ReductionOp

_install_jax_hints()
_register_export(Tensor)  # Tensor in jax.export's serialized calling convention
