"""The training step's building blocks, for the benchmarks and tests that take ``fit``
apart; not user API (users call ``ax.train.fit``, ``ax.train.TrainStep`` or
``ax.train.make_train_step``)."""

from ._precision import ScaledOptimizer as ScaledOptimizer
from ._precision import for_training as for_training
from ._run_state import copy_tree as copy_tree
from ._run_state import finite_and_copy as finite_and_copy
from ._setup import prepare as prepare
from ._step import all_finite as all_finite
from ._step import call_loss as call_loss
from ._step import make_flat_train_step as make_flat_train_step
