"""axjax graph: the paper's computation graph (Input, Param, Const, Apply and Loop nodes),
fold/scan over a named axis (eager and on nodes), compile, graph gradients and rendering."""

from ._compile import CompiledGraph as CompiledGraph
from ._compile import compile as compile
from ._graph import Graph as Graph
from ._graph_grad import GraphGrad as GraphGrad
from ._graph_grad import LossProgram as LossProgram
from ._graph_grad import graph_grad as graph_grad
from ._loop import Loop as Loop
from ._nodes import Apply as Apply
from ._nodes import Const as Const
from ._nodes import Input as Input
from ._nodes import MultiApply as MultiApply
from ._nodes import Node as Node
from ._nodes import Param as Param
from ._nodes import Part as Part
from ._params import as_params as as_params
from ._params import as_values as as_values
from ._scan import Fold as Fold
from ._scan import Scan as Scan
from ._scan import ScanAt as ScanAt
from ._scan import fold as fold
from ._scan import scan as scan
