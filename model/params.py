"""Packing named parameter blocks into one unconstrained vector, with freeze masks.

Each block has a name, a shape and a transform (identity for means and inducing inputs,
softplus for anything positive). The optimiser only sees the unconstrained entries of the
blocks that are not frozen. Freezing is per block (``freeze``) or per entry of a block
(``freeze_entries``, e.g. the observed features of q(X) in the semi-supervised GP); the
free mask combines both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Block:
    name: str
    shape: tuple[int, ...]
    transform: object  # forward / inverse / gradfactor

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


class ParamLayout:
    """Ordered blocks -> one flat vector; ``frozen`` names are left out of ``free`` vectors,
    and so are the entries marked in ``frozen_entries`` (name -> bool array of the block's
    shape, True = held fixed)."""

    def __init__(self, blocks: list[Block]):
        self.blocks = list(blocks)
        self.slices: dict[str, slice] = {}
        i = 0
        for b in self.blocks:
            self.slices[b.name] = slice(i, i + b.size)
            i += b.size
        self.size = i
        self.frozen: set[str] = set()
        self.frozen_entries: dict[str, np.ndarray] = {}

    @property
    def names(self) -> list[str]:
        return [b.name for b in self.blocks]

    # --- frozen / free ------------------------------------------------------------------
    def freeze(self, *names: str) -> None:
        for n in names:
            if n not in self.slices:
                raise KeyError(f"unknown parameter {n!r}; known: {self.names}")
            self.frozen.add(n)

    def unfreeze(self, *names: str) -> None:
        for n in names:  # as freeze: a misspelt name is an error, not silently nothing
            if n not in self.slices:
                raise KeyError(f"unknown parameter {n!r}; known: {self.names}")
        self.frozen.difference_update(names)

    def freeze_entries(self, name: str, mask) -> None:
        """Hold the entries of block ``name`` where ``mask`` (the block's shape) is True;
        replaces an earlier entry mask of that block. Block freezing is independent."""
        if name not in self.slices:
            raise KeyError(f"unknown parameter {name!r}; known: {self.names}")
        shape = self.blocks[self.names.index(name)].shape
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != shape:
            raise ValueError(f"entry mask of {name!r} must be a bool array of shape {shape}, "
                             f"got {mask.dtype} {mask.shape}")
        self.frozen_entries[name] = mask.copy()

    def unfreeze_entries(self, *names: str) -> None:
        for n in names:
            self.frozen_entries.pop(n, None)

    def free_mask(self) -> np.ndarray:
        mask = np.ones(self.size, dtype=bool)
        for n, m in self.frozen_entries.items():
            mask[self.slices[n]] = ~m.ravel()
        for n in self.frozen:
            mask[self.slices[n]] = False
        return mask

    # --- transforms -------------------------------------------------------------------------
    def pack(self, values: dict[str, np.ndarray]) -> np.ndarray:
        """Constrained values by name -> full unconstrained vector."""
        x = np.empty(self.size)
        for b in self.blocks:
            self._put(x, b, values[b.name])
        return x

    def with_block(self, x: np.ndarray, name: str, value) -> np.ndarray:
        """A copy of ``x`` with block ``name`` set to ``value`` (parameter space); every other
        entry is left bit for bit (``pack`` of ``unpack`` may move them by a rounding)."""
        if name not in self.slices:
            raise KeyError(f"unknown parameter {name!r}; known: {self.names}")
        x = np.array(x, dtype=np.float64)
        self._put(x, self.blocks[self.names.index(name)], value)
        return x

    def _put(self, x: np.ndarray, b: Block, value) -> None:
        """Block ``b``'s entries of ``x`` (in place) from its constrained ``value``."""
        v = np.asarray(value, dtype=np.float64)
        if v.shape != b.shape:
            raise ValueError(f"parameter {b.name!r} has shape {v.shape}, expected {b.shape}")
        x[self.slices[b.name]] = b.transform.inverse(v).ravel()

    def unpack(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Full unconstrained vector -> constrained values by name."""
        return {b.name: b.transform.forward(x[self.slices[b.name]]).reshape(b.shape)
                for b in self.blocks}

    def chain(self, x: np.ndarray, grads: dict[str, np.ndarray]) -> np.ndarray:
        """Gradients w.r.t. constrained values -> gradient w.r.t. the full vector x."""
        g = np.empty(self.size)
        for b in self.blocks:
            s = self.slices[b.name]
            g[s] = np.asarray(grads[b.name], dtype=np.float64).ravel() * b.transform.gradfactor(x[s])
        return g
