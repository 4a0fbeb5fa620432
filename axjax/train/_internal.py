"""The training step's building blocks, for the benchmarks that take ``fit`` apart; not user
API (users call ``ax.train.fit`` or ``ax.train.make_train_step``)."""

from ._run_state import copy_tree as copy_tree
from ._run_state import finite_and_copy as finite_and_copy
from ._step import all_finite as all_finite
from ._step import call_loss as call_loss
from ._step import make_flat_train_step as make_flat_train_step
