"""Kernels from strings: "rbf", "linear", "rbf+bias", "rbf+linear+bias+white", ..."""

from __future__ import annotations

from .base import Kernel
from .bias import Bias, White
from .linear import Linear
from .rbf import RBF
from .sum import Sum

#: part name -> class (default parameters: every variance and lengthscale 1, as in GPy)
_REGISTRY: dict[str, type[Kernel]] = {"rbf": RBF, "linear": Linear, "bias": Bias, "white": White}
KERNEL_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def make_kernel(spec, input_dim: int) -> Kernel:
    """A kernel from a ``Kernel`` (returned as is) or a "+"-separated string of part names.

    Names are case-insensitive and spaces are ignored; one name gives that kernel, several
    a :class:`Sum` in the given order. Raises ValueError for an unknown name or a kernel
    instance with another input_dim.
    """
    input_dim = int(input_dim)
    if isinstance(spec, Kernel):
        if spec.input_dim != input_dim:
            raise ValueError(f"kernel has input_dim {spec.input_dim}, expected {input_dim}")
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"kernel must be a Kernel or a string, got {type(spec).__name__}")
    names = "".join(spec.split()).lower().split("+")
    unknown = [n for n in names if n not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown kernel name(s) {unknown} in {spec!r}; known names: "
                         f"{', '.join(KERNEL_NAMES)} (combine with '+', e.g. 'rbf+bias+white')")
    parts = [_REGISTRY[n](input_dim) for n in names]
    return parts[0] if len(parts) == 1 else Sum(parts)
