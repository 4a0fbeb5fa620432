"""The training step's building blocks, for the benchmarks that take ``fit`` apart; not user
API (users call ``ax.train.fit`` or ``ax.train.make_train_step``)."""

from ._step import all_finite as all_finite
from ._step import call_loss as call_loss
