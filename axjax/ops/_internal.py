"""What the packages above ops (graph, nn, train) use of its helpers; not user API."""

from ._conv import Padding as Padding
from ._conv import normalize_padding as normalize_padding
from ._conv import per_axis as per_axis
from ._elementwise import narrowed as narrowed
from ._elementwise import widened as widened
from ._select import check_labels as check_labels
