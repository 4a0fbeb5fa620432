"""axjax parallel: sharding by axis name over a device mesh.

The rules (``{Batch: "data", Hidden: "model"}``) and what reads them: ``axis_rules``,
``shard``, ``sharding``, ``abstract``, ``sharded_init``, ``partition_spec``; the
collectives inside ``jax.shard_map`` (``psum``, ``pmean``, ``all_gather``); ``Parallel``
(a training run over a mesh) and the launch flags of a training script. It builds on core
alone; core's ops read the current rules from core's context (core/_context.py), which
``axis_rules`` sets. The public names are re-exported by ``axjax`` (the rules and the
collectives) and ``axjax.train`` (``Parallel`` and the flags).
"""

from ._collective import all_gather as all_gather
from ._collective import pmean as pmean
from ._collective import psum as psum
from ._launch import ParallelPreset as ParallelPreset
from ._launch import add_parallel_args as add_parallel_args
from ._launch import parallel_from_args as parallel_from_args
from ._launch import unsharded as unsharded
from ._parallel import Parallel as Parallel
from ._rules import AxisRules as AxisRules
from ._rules import abstract as abstract
from ._rules import axis_rules as axis_rules
from ._rules import shard as shard
from ._rules import sharded_init as sharded_init
from ._rules import sharding as sharding
from ._sharding import partition_spec as partition_spec
