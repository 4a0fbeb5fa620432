"""What the packages above (nn, train) use of ``axjax.parallel``; not user API."""

from ._gather import unsplit_leading as unsplit_leading
from ._parallel import queue_bound as queue_bound
