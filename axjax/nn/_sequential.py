"""``Sequential``: layers and functions applied in order; ``Lambda`` wraps a function."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic

import equinox as eqx
import jax
from typing_extensions import TypeVarTuple, Unpack

from ._registry import register_layer
from ._util import split

__all__ = ["Sequential", "Lambda"]

# the layers' types, in order (set by the mypy plugin); unknown otherwise
Layers = TypeVarTuple("Layers", default=Unpack[tuple[Any, ...]])


@register_layer(typed="signature")
class Lambda(eqx.Module):
    """A function as a layer (no parameters); the function is static.

    Example:
        >>> ax.nn.Lambda(ax.relu)(x)     # same as ax.relu(x)
    """

    fn: Callable[..., Any] = eqx.field(static=True)

    def __call__(self, x: Any, *, key: jax.Array | None = None) -> Any:
        """Apply the function; ``key`` is ignored."""
        return self.fn(x)


@register_layer(typed="chain")
class Sequential(eqx.Module, Generic[*Layers]):
    """Apply layers in order. Plain functions (activations) are wrapped in :class:`Lambda`.

    Each layer is called as ``layer(x, key=k)`` with its own key split from ``key``
    (``None`` when no key is given), so a :class:`Dropout` inside gets fresh randomness.

    Typing: under the mypy plugin, ``Sequential([...])`` is typed by its layers (a
    ``Sequential[Affine[F32, Pixel, Hidden], ..., Affine[F32, Hidden, Class]]``) and a call
    is checked layer by layer, each with its own rule: the result type is exact, and a
    chain whose axes cannot line up is an error at the call. Without the plugin the call is
    ``Any`` (a type cannot thread a value through a list of layers).

    Example:
        >>> model = ax.nn.Sequential([
        ...     ax.nn.Affine(Pixel, Hidden, 784, 300, key=k1), ax.relu,
        ...     ax.nn.Affine(Hidden, Class, 300, 10, key=k2),
        ... ])
        >>> model(images)            # Tensor[F32, Batch, Pixel] -> Tensor[F32, Batch, Class]
    """

    layers: tuple[Any, ...]

    def __init__(self, layers: Sequence[Callable[..., Any]]) -> None:
        wrapped: list[Any] = []
        for layer in layers:
            if not callable(layer):
                raise TypeError(
                    f"Sequential: {layer!r} is not callable (give layers or "
                    "functions such as ax.relu)"
                )
            wrapped.append(layer if isinstance(layer, eqx.Module) else Lambda(layer))
        self.layers = tuple(wrapped)

    def __call__(self, x: Any, *, key: jax.Array | None = None) -> Any:
        """Apply every layer in order."""
        for layer, k in zip(self.layers, split(key, len(self.layers)), strict=True):
            x = layer(x, key=k)
        return x

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return Sequential(self.layers[i])
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.layers)
