"""Initialisers whose fan-in and fan-out come from named axes (see ``axjax.nn._init``)."""

from ._init import Initializer as Initializer
from ._init import constant as constant
from ._init import fan as fan
from ._init import glorot_normal as glorot_normal
from ._init import glorot_uniform as glorot_uniform
from ._init import he_normal as he_normal
from ._init import he_uniform as he_uniform
from ._init import lecun_normal as lecun_normal
from ._init import lecun_uniform as lecun_uniform
from ._init import normal as normal
from ._init import ones as ones
from ._init import orthogonal as orthogonal
from ._init import uniform as uniform
from ._init import variance_scaling as variance_scaling
from ._init import zeros as zeros
