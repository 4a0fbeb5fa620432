"""The one registry of layers: each layer class of ``axjax.nn`` is declared here once.

A declaration names how the static checkers type the layer's call. Everything else is
produced from it or checked against it:

- ``tools/gen_overloads.py`` writes the typed overloads of ``ax.nn.cast`` and of a policy's
  casts (``nn/_precision.py``) for every layer whose first type parameter is its dtype;
- the mypy plugin (``axjax/mypy/_layers.py``) judges the calls of the layers declared
  ``typed="stand-in"``, each run on the stand-in its rule makes (one entry in
  ``axjax/mypy/_layer_rules.py``), and threads a chain's argument through its layers;
- ``tests/nn/test_layer_table.py`` checks that every layer ``ax.nn`` exports is declared,
  documented in docs/nn.md and covered by a typing case, and that each stand-in has a rule;
- the declaration registers the class with ``jax.export`` (``nn/_export.py``), so a model
  of these layers is an argument of a serialized function (``tests/nn/test_nn_export.py``
  round-trips every declared layer);
- ``linear_maps`` names the raw weight Tensors the layer uses as linear maps (each with the
  layer's attributes holding its input and output axes): ``ax.nn.lora`` adapts them, and the
  layer computes each through ``project`` (``nn/_adapted.py``; ``tests/nn/test_lora_models.py``
  checks every declared field is adapted and every raw ``contract`` of one is declared).

Example (a new layer is this decorator on its class, a typing case and a docs mention):

    >>> @register_layer()
    ... class Scale(eqx.Module, Generic[D, In]): ...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, TypeVarTuple

from ..core import DType
from ..core._internal import NAMED, public_init, public_method
from ._export import exportable

__all__ = [
    "LayerSpec",
    "Typed",
    "axis_rules",
    "checks_axes",
    "declared_layers",
    "linear_maps",
    "register_layer",
]

#: How a layer's call is typed: ``stand-in`` (the mypy plugin runs the layer on stand-ins of
#: its type arguments, so its own run-time checks are its static ones), ``chain`` (a list of
#: layers whose call threads its argument through each, as ``Sequential``), ``stack`` (one
#: block applied along a stacking axis: its call keeps the block's input type, ``LayerStack``),
#: ``wrapper`` (one module called as it is: its call is the module's call, ``Remat``),
#: ``ensemble`` (one module called on every member: its call is the module's call with the
#: ensemble's axis first in each output Tensor, ``Ensemble``),
#: ``signature`` (its hand-written signature alone: the same in every checker).
Typed = Literal["stand-in", "chain", "stack", "wrapper", "ensemble", "signature"]
L = TypeVar("L", bound=type[Any])
#: one linear map's axes, as the names of the layer's attributes holding them:
#: ``(("embed_axis",), ("head_axis", "head_dim_axis"))`` (input axes, output axes)
MapAxes = tuple[tuple[str, ...], tuple[str, ...]]
Axes = tuple[type[Any], ...]


@dataclass(frozen=True)
class LayerSpec:
    """One layer's declaration."""

    layer: type[Any]
    typed: Typed
    sized: bool  # the plugin runs it on stand-ins with sizes (it builds a state from them)
    #: ``{field: (input-axis attributes, output-axis attributes)}``: its raw linear maps
    maps: Mapping[str, MapAxes] = field(default_factory=dict, hash=False, compare=False)

    @property
    def name(self) -> str:
        """The layer's public name in ``axjax.nn``."""
        return self.layer.__name__

    @property
    def path(self) -> str:
        """The class's full name where it is defined (what the mypy plugin sees)."""
        return f"{self.layer.__module__}.{self.layer.__qualname__}"

    @property
    def castable(self) -> bool:
        """Whether its first type parameter is its dtype: ``ax.nn.cast`` retypes it
        (``Affine[F32, In, Out]`` -> ``Affine[BF16, In, Out]``)."""
        params = getattr(self.layer, "__parameters__", ())
        first = params[0] if params else None
        bound = getattr(first, "__bound__", None)
        return isinstance(first, TypeVar) and isinstance(bound, type) and issubclass(bound, DType)

    @property
    def axis_parameters(self) -> tuple[TypeVar | TypeVarTuple, ...]:
        """Its type parameters after the dtype (a castable layer's axes)."""
        return tuple(getattr(self.layer, "__parameters__", ())[1:])


_LAYERS: dict[type[Any], LayerSpec] = {}


def register_layer(
    *,
    typed: Typed = "stand-in",
    sized: bool = False,
    linear_maps: Mapping[str, MapAxes] | None = None,
) -> Callable[[L], L]:
    """Declare a layer class of ``axjax.nn`` (a decorator on the class); ``linear_maps``:
    its raw weight fields used as linear maps, each with the names of the attributes that
    hold its input and output axes (``{"gate": (("embed_axis",), ("hidden_axis",))}``)."""

    def declare(cls: L) -> L:
        for other in _LAYERS.values():
            if other.layer is not cls and other.name == cls.__name__:
                raise TypeError(
                    f"register_layer: a layer named {cls.__name__} is already declared "
                    f"({other.path}); choose another name"
                )
        _LAYERS[cls] = LayerSpec(cls, typed, sized, dict(linear_maps or {}))
        call = next((k.__dict__["__call__"] for k in cls.__mro__ if "__call__" in k.__dict__), None)
        if call is not None and call not in NAMED:  # errors inside name the layer
            cls.__call__ = public_method(call)
        init = cls.__dict__.get("__init__")
        if init is not None and init not in NAMED:  # the validators name the layer built
            cls.__init__ = public_init(init)
        exportable(cls)
        return cls

    return declare


def linear_maps(layer: object) -> dict[str, tuple[Axes, Axes]]:
    """``{field: (input axes, output axes)}`` of the raw linear maps ``layer`` (an instance)
    declares; ``{}`` for an undeclared object or a layer without any."""
    spec = _LAYERS.get(type(layer))
    if spec is None:
        return {}
    return {
        f: (
            tuple(getattr(layer, a) for a in ins),
            tuple(getattr(layer, a) for a in outs),
        )
        for f, (ins, outs) in spec.maps.items()
    }


def declared_layers() -> tuple[LayerSpec, ...]:
    """Every declaration, in the order the modules made them."""
    return tuple(_LAYERS.values())


_AXIS_RULES: dict[str, str] = {}
F = TypeVar("F", bound=Callable[..., Any])


def checks_axes(rule: Callable[..., object]) -> Callable[[F], F]:
    """Declare a public function of ``axjax.nn`` (not a layer) whose axes and dtype are
    checked at run time by ``rule``, called with the function's own arguments: the mypy
    plugin runs ``rule`` on stand-ins of a call's arguments and reports what it refuses
    (``tests/typing/test_static_rules.py`` checks that each has its static rule).

    Example:
        >>> @checks_axes(rope_axes)
        ... def rotary_embedding(x, pos, over, *, theta=10000.0, offset=0): ...
    """

    def declare(fn: F) -> F:
        path = f"{fn.__module__}.{fn.__qualname__}"
        _AXIS_RULES[path] = f"{rule.__module__}.{rule.__qualname__}"
        return fn

    return declare


def axis_rules() -> dict[str, str]:
    """``{function's full name: its rule's full name}`` for every :func:`checks_axes`."""
    return dict(_AXIS_RULES)
