"""What the other axjax packages (ops, graph, nn, train, the mypy plugin) use of core.

Users import ``axjax``; the library's own packages import core's public names from
``axjax.core`` and its helpers from here, never from core's private modules, so core can
reorganise its files without breaking them. Nothing here is part of the user-facing API.
"""

from ._arrays import Array as Array
from ._arrays import ArrayData as ArrayData
from ._arrays import AxesArray as AxesArray
from ._arrays import array_type as array_type
from ._axis import axes_names as axes_names
from ._axis import axis_name as axis_name
from ._axis import check_axis_label as check_axis_label
from ._choices import check_choice as check_choice
from ._choices import checks_choices as checks_choices
from ._choices import literal_choices as literal_choices
from ._choices import string_choices as string_choices
from ._context import Table as Table
from ._context import placing as placing
from ._contract import check_layout as check_layout
from ._contract import not_a_tensor as not_a_tensor
from ._dtype import FLOATING as FLOATING
from ._dtype import accumulation_dtype as accumulation_dtype
from ._dtype import dtype_marker as dtype_marker
from ._dtype import fit_dtype as fit_dtype
from ._dtype import is_floating as is_floating
from ._dtype import is_inexact as is_inexact
from ._dtype import jax_dtype as jax_dtype
from ._dtype import narrowed_error as narrowed_error
from ._dtype import to_numpy_dtype as to_numpy_dtype
from ._errors import HasType as HasType
from ._errors import check_unique_axes as check_unique_axes
from ._errors import describe as describe
from ._errors import fail as fail
from ._finite import checking_finite as checking_finite
from ._finite import node_site as node_site
from ._op import apply as apply
from ._op import cached as cached
from ._op import require_floating as require_floating
from ._op import require_numbers as require_numbers
from ._op import result_dtype as result_dtype
from ._op import same_sizes as same_sizes
from ._optional import Feature as Feature
from ._provenance import constructed as constructed
from ._provenance import origins as origins
from ._provenance import provenance_enabled as provenance_enabled
from ._pytree import flatten as flatten
from ._pytree import is_tensor as is_tensor
from ._pytree import unflatten as unflatten
from ._pytree import wrap as wrap
from ._registry import OpSpec as OpSpec
from ._registry import declared_ops as declared_ops
from ._registry import register_op as register_op
from ._source import user_frame as user_frame
from ._source import user_site as user_site
from ._symbolic import Symbolic as Symbolic
from ._symbolic import is_symbolic as is_symbolic
from ._tensor import bare_type as bare_type
from ._tensor import trusted_tensor as trusted_tensor
from ._tensor import unnamed_dims as unnamed_dims
from ._validate import finite_float as finite_float
from ._validate import index_int as index_int
from ._validate import int_in_range as int_in_range
from ._validate import non_negative_float as non_negative_float
from ._validate import non_negative_int as non_negative_int
from ._validate import optional_positive_int as optional_positive_int
from ._validate import positive_float as positive_float
from ._validate import positive_int as positive_int
from ._validate import positive_ints as positive_ints
from ._validate import positive_sizes as positive_sizes
from ._validate import probability as probability
