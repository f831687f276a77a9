"""The dynamical GP-LVM on Dask (``DynamicalGPLVM(Y, t, sequences=..., client=...)``).

Kt is block-diagonal over independent sequences, so whole sequences are independent: each
block of rows on a worker holds whole sequences, and its prior is the dynamical prior
(dense or state-space form) over them. The time kernel's parameters are global: the
driver holds them, sends their values with each evaluation and sums the blocks'
gradients. Sequences are dealt to the blocks in the order of their ids (first
appearance), as many rows per block as it takes to reach an even share.
"""

from __future__ import annotations

import copy

import numpy as np

from ..dynamical import (SMOOTH_TIME_KINDS, DynamicalGPLVM, _init_time_kernel, check_t_new, check_times,
                         resolve_time_prior)
from ..optimize import MEMORY
from ..params import Block
from ..priors import DynamicalPrior, StateSpacePrior
from ..priors.dynamical import sequence_index, sequence_number
from ..time_kernels import make_time_kernel
from ..transforms import POSITIVE
from .blocks import is_dask_array
from .faults import CALL_TIMEOUT
from .model import DistributedGPLVM

#: rows of PCA means gathered to start the time kernel's scales (whole sequences)
INIT_TIME_ROWS = 50_000


def sequence_blocks(index: list[np.ndarray], k: int | None = None, rows: tuple | None = None):
    """(order, rows): the row order that puts whole sequences (``index``: each one's rows)
    into consecutive blocks, and the rows per block: k blocks of about N / k rows, or the
    given ``rows`` (which must fall between sequences)."""
    sizes = np.array([len(ix) for ix in index])
    N = int(sizes.sum())
    ends = np.cumsum(sizes)
    if rows is None:
        k = max(1, min(int(k), len(index)))
        cuts = sorted({int(np.searchsorted(ends, N * j / k, side="left")) for j in range(1, k)})
        bounds = [0] + [int(ends[c]) for c in cuts if ends[c] < N] + [N]
        rows = tuple(int(b - a) for a, b in zip(bounds[:-1], bounds[1:]) if b > a)
    elif not set(np.cumsum(rows).tolist()) <= set(ends.tolist()):
        raise ValueError(f"blocks of {list(rows)} rows would split a sequence")
    return np.concatenate(index), tuple(rows)


class DistributedDynamicalGPLVM(DistributedGPLVM):
    """``DynamicalGPLVM`` with whole sequences on Dask workers (module docstring).

    Y : (N, D) NumPy array, or a dask array whose rows hold each sequence contiguously
    (then the blocks follow the sequences: Y is rechunked to them). t, sequences,
    time_kernel, learn_time_variance, time_prior, state_space_options as
    ``DynamicalGPLVM``'s; client, chunks, memory as ``DistributedGPLVM``'s.
    """

    def __init__(self, Y, t, latent_dim: int = 2, num_inducing: int = 20, kernel="rbf",
                 time_kernel="matern32", sequences=None, seed: int | None = 0,
                 learn_time_variance: bool = False, time_prior: str = "auto",
                 state_space_options: dict | None = None, mask=None, client="local",
                 chunks: int | None = None, memory: int = MEMORY, timeout: float = CALL_TIMEOUT,
                 _init: bool = True, _rows: tuple | None = None):
        N = int(Y.shape[0])
        self.t, self.sequences = check_times(t, N, sequences)
        self._time_kernel_arg = time_kernel
        self.time_kernel = make_time_kernel(copy.deepcopy(time_kernel))
        self.time_prior = resolve_time_prior(time_prior, self.time_kernel)
        self._state_space_options = dict(state_space_options or {})
        self.sequence_ids, self._index = sequence_index(self.sequences)
        super().__init__(Y, latent_dim, num_inducing, kernel, seed=seed, mask=mask, client=client,
                         chunks=chunks, memory=memory, timeout=timeout, _init=False, _rows=_rows)
        if not learn_time_variance:
            self.frozen |= set(self.smooth_time_variances())
        if _init:
            try:
                self._initialise(self.num_inducing, seed)
            except BaseException:
                self.close()
                raise

    def smooth_time_variances(self) -> list[str]:
        tk = self.time_kernel
        return [f"time_kernel.{p.name}.variance" if len(tk.parts) > 1 else "time_kernel.variance"
                for p in tk.parts if p.name in SMOOTH_TIME_KINDS]

    # --- the blocks: whole sequences ------------------------------------------------------------
    def _load(self, Y, chunks, rows) -> None:
        k = chunks if chunks is not None else len(self._conn.workers)
        self._order, rows = sequence_blocks(self._index, k, rows)
        self._starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        if is_dask_array(Y):
            if not np.array_equal(self._order, np.arange(self.t.shape[0])):
                raise ValueError("on a dask array the rows of each sequence must be consecutive, the sequences "
                                 "in the order of their first rows: sort Y's rows (and t, sequences) by sequence")
        else:
            Y = np.asarray(Y, dtype=np.float64)[self._order]
        super()._load(Y, None, rows)

    def _block_rows_index(self, i: int) -> np.ndarray:
        return self._order[self._starts[i]:self._starts[i + 1]]

    def _block_prior(self, i: int, n: int):
        r = self._block_rows_index(i)
        tk = copy.deepcopy(self.time_kernel)
        if self.time_prior == "state_space":
            return StateSpacePrior(self.t[r], self.sequences[r], self._Q, tk, self._state_space_options)
        return DynamicalPrior(self.t[r], self.sequences[r], self._Q, tk)

    def _to_y_order(self, a: np.ndarray) -> np.ndarray:
        out = np.empty_like(a)
        out[self._order] = a
        return out

    def _from_y_order(self, a: np.ndarray) -> np.ndarray:
        return a[self._order]

    # --- the time kernel: global ---------------------------------------------------------------
    def _prior_blocks(self) -> list:
        return [Block("time_kernel." + k, (), POSITIVE) for k in self.time_kernel.params]

    def _prior_start(self) -> dict:
        return {"time_kernel." + k: v for k, v in self.time_kernel.params.items()}

    def _init_prior(self, V: np.ndarray) -> None:
        """The time kernel's scales from the PCA paths of whole sequences (up to
        ``INIT_TIME_ROWS`` rows), as ``DynamicalGPLVM``'s start does on all of them."""
        if not isinstance(self._time_kernel_arg, str):
            return
        take, n = [], 0
        for ix in self._index:
            if n and n + len(ix) > INIT_TIME_ROWS:
                break
            take.append(ix)
            n += len(ix)
        rows = np.concatenate(take)
        pos = np.empty(self.t.shape[0], dtype=np.int64)
        pos[self._order] = np.arange(self.t.shape[0])
        at = np.sort(pos[rows])
        mu = self._pca_rows(at)
        sub = DynamicalPrior(self.t[self._order[at]], self.sequences[self._order[at]], self._Q, self.time_kernel)
        _init_time_kernel(sub, mu)

    # --- training sequences: on the worker that holds each ---------------------------------------
    def _sequence_block(self, sequence) -> int:
        """Index of the block that holds training sequence ``sequence``."""
        k = sequence_number(self.sequence_ids, sequence)
        first = sum(len(ix) for ix in self._index[:k])  # its first row in block order
        return int(np.searchsorted(self._starts, first, side="right") - 1)

    def _on_sequence(self, method: str, sequence, *args):
        """``RowBlock.method(prior values, *args, sequence)`` on the block that holds training
        sequence ``sequence`` (any block for None: the prior alone), at the current values."""
        i = 0 if sequence is None else self._sequence_block(sequence)
        pv = self._prior_values(self._globals())
        return self._all(method, pv, *args, sequence, only=[i])[0]

    def latent_at(self, t_new, sequence=0) -> tuple[np.ndarray, np.ndarray]:
        """q(X*) at times t_new of training sequence ``sequence`` (qxstar), as
        ``DynamicalGPLVM.latent_at``: means and variances (n*, Q), computed on the worker
        that holds the sequence. ``sequence=None``: a new sequence (the prior)."""
        return self._on_sequence("latent_at", sequence, check_t_new(t_new))

    def forecast(self, t_new, sequence=0, include_noise: bool = True, calibrated: bool = True):
        """Predictive mean and variance (n*, D) of y at times t_new of ``sequence``:
        ``latent_at``, then ``predict`` at those Gaussian inputs (meanFstar / covFstar);
        scaled by the calibration if there is one and ``calibrated``, as
        ``DynamicalGPLVM.forecast``."""
        mu, S = self.latent_at(t_new, sequence)
        return self.predict(mu, S, include_noise=include_noise, calibrated=calibrated)

    # --- frames of new sequences, or new frames of training ones (``sequences.py``) -----------
    def infer_sequence(self, Y_star, t_star, sequence=None, max_iters: int = 500, progress: bool | None = False):
        """q(X*) of the frames Y_star (n*, D; NaN = missing) at times t_star (n*,) of a new
        sequence (``sequence`` None) or of training sequence ``sequence``, as
        ``DynamicalGPLVM.infer_sequence``, here from the training statistics gathered from
        the workers (M x M and M x D sums; for a training sequence also its conditional prior,
        from the worker that holds it). Returns a ``SequenceFit``."""
        from .sequences import infer_frames

        return infer_frames(self, Y_star, t_star, sequence, max_iters, progress)

    def reconstruct(self, Y_star, t_star, sequence=None, max_iters: int = 500, progress: bool | None = False,
                    condition: bool = True, calibrated: bool = True):
        """Fill the NaN entries of frames Y_star (n*, D) at times t_star of a new sequence or
        of training sequence ``sequence``: mean and variance (n*, D), as
        ``DynamicalGPLVM.reconstruct`` (``condition``, ``calibrated`` included)."""
        from .sequences import reconstruct_frames

        self._baseline_warning()
        return reconstruct_frames(self, Y_star, t_star, sequence, max_iters, progress, condition, calibrated)

    def fill_missing(self, fit, Y_star, condition: bool = True, include_noise: bool = True,
                     calibrated: bool = True):
        """Mean and variance (n*, D) of frames Y_star (NaN = missing) at their q(X*) ``fit``
        (from ``infer_sequence``), observed entries passed through with variance 0, as
        ``DynamicalGPLVM.fill_missing`` (``condition``, ``include_noise``, ``calibrated``
        included), from the training statistics gathered from the workers."""
        from .sequences import fill_frames

        return fill_frames(self, fit, Y_star, condition, include_noise, self._active_calibration(calibrated))

    def infer_sequences(self, sequences, max_iters: int = 500) -> list:
        """``infer_sequence`` of many new sequences, [(Y_star, t_star), ...], on the workers
        (each independent given the training statistics): a list of ``SequenceFit``."""
        from .sequences import map_sequences

        return map_sequences(self, sequences, "infer", max_iters)

    def reconstruct_sequences(self, sequences, max_iters: int = 500, calibrated: bool = True) -> list:
        """``reconstruct`` of many new sequences on the workers (``calibrated`` as there): a
        list of (mean, var)."""
        from .sequences import map_sequences

        self._baseline_warning()
        return map_sequences(self, sequences, "reconstruct", max_iters, self._active_calibration(calibrated))

    def infer_latent(self, *args, **kwargs):
        """Not for sequences: frames are coupled through time; see ``infer_sequence``."""
        raise TypeError("DynamicalGPLVM couples frames through time: use infer_sequence(Y_star, t_star) "
                        "for q(X*) and reconstruct(Y_star, t_star) for the outputs")

    log_density = infer_latent

    #: calibrations of held-out stretches of frames (``calibration_sequences``), as in process
    _calibration_kind = DynamicalGPLVM._calibration_kind
    _in_process = "DynamicalGPLVM"

    def _identity(self) -> dict:
        return dict(super()._identity(), time_kernel=self.time_kernel.spec, time_prior=self.time_prior)

    def _checkpoint_meta(self) -> dict:
        return {"model": "dynamical", "state_space_options": self._state_space_options}

    def _checkpoint_arrays(self) -> dict:
        return {"t": self.t, "sequences": self.sequences}

    def __repr__(self) -> str:
        return (f"DistributedDynamicalGPLVM(N={getattr(self, 'N', '?')}, D={getattr(self, 'D', '?')}, "
                f"sequences={len(self.sequence_ids)}, latent_dim={self.latent_dim}, "
                f"blocks={len(getattr(self, '_blocks', []) or [])}, time_prior={self.time_prior!r})")

    @classmethod
    def from_model(cls, model, client="local", chunks: int | None = None, memory: int = MEMORY):
        """The in-process ``DynamicalGPLVM``'s data and parameters, whole sequences per block."""
        model._sync_kernel()
        model.prior.sync(model._values())
        dm = cls(model.Y, model.t, model.latent_dim, model.num_inducing, copy.deepcopy(model.kernel),
                 time_kernel=copy.deepcopy(model.prior.time_kernel), sequences=model.sequences,
                 seed=model.seed, time_prior=model.time_prior, learn_time_variance=True,
                 state_space_options=model._state_space_options, client=client, chunks=chunks,
                 memory=memory, _init=False)
        dm._copy_parameters(model)
        return dm
