"""Fitting a distributed model: the optimiser's parts, the fit, recovery from a lost
worker and checkpoints (the ``Training`` part of ``DistributedGPLVM``).

The fit is the vector-free L-BFGS of ``vlbfgs`` over the driver's part (the globals) and
the blocks' parts (q(X) of their rows): ``_direction`` and ``_commit`` are queued and sent
with the next forward round, ``_trial`` is one evaluation (``DistributedGPLVM._evaluate``),
``_accept`` one round of dot products.
"""

from __future__ import annotations

import time

import numpy as np

from ..gplvm import FIT_ITERS, INIT_CHECK, INIT_ITERS, _check_int
from ..linalg import CholeskyError
from ..optimize import MAX_RESTARTS, RESTART_GAIN
from ..progress import ProgressBar
from . import checkpoint as ckpt
from .vlbfgs import minimize_vlbfgs

#: f handed to the optimiser where the bound cannot be evaluated (it shortens the step)
_BAD_VALUE = 1e300
#: worker losses a fit recovers from before it gives up
MAX_RECOVERIES = 5


class _Stop(Exception):
    pass


class Training:
    """Fit, recovery and checkpoints of ``DistributedGPLVM`` (which holds the state)."""

    # --- the optimiser's parts (vlbfgs.Parts) -----------------------------------------------
    #: the blocks' share of ``_direction`` / ``_commit`` calls, sent with the next forward
    _ops: list

    def _direction(self, a, b, c) -> None:
        self._gpart.direction(a, b, c)
        self._ops.append(("direction", np.asarray(a), np.asarray(b), float(c)))

    def _perturb(self, k: int) -> None:
        self._gpart.perturb(k)
        self._ops.append(("perturb", int(k)))

    def _trial(self, stp: float):
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                F, out = self._evaluate(stp)
        except (CholeskyError, ArithmeticError, np.linalg.LinAlgError, ValueError):
            F, out = np.nan, None
        if out is None or not np.isfinite(F) or not np.isfinite(out["gd"]):
            self._last_g = None
            return _BAD_VALUE, 0.0, 0.0
        self._last_g = out["g"]
        return -F, out["gd"], out["gmax"]

    def _accept(self) -> np.ndarray:
        return self._gpart.accept() + sum(self._all("accept"))

    def _commit(self, slot: int) -> None:
        self._gpart.commit(slot)
        self._ops.append(("commit", int(slot)))

    def _keep(self) -> None:
        """Every part remembers its x: the best iterate so far (queued, as ``_commit``)."""
        self._gpart.keep()
        self._ops.append(("keep",))

    def _to_best(self) -> None:
        """Every part back at the remembered iterate, now (one round, queued calls first)."""
        self._gpart.to_best()
        ops, self._ops = tuple(self._ops) + (("to_best",),), []
        self._all("run_ops", ops)

    # --- training --------------------------------------------------------------------------
    def fit(self, max_iters: int = FIT_ITERS, init_iters: int | None = None, callback=None,
            progress: bool | None = None, checkpoint: str | None = None,
            checkpoint_every: int = 10) -> "Training":
        """Maximise the bound with vector-free L-BFGS (``vlbfgs``) for ``max_iters`` more
        iterations: the in-process fit's phases (the noise held for the model's first
        ``init_iters`` iterations, ``INIT_CHECK`` of them unconditionally, then only while
        the model wants less noise), its steps and ends; where its last step lowered the
        bound it goes back to its best iterate, as in process. ``callback(iteration, bound)``
        after each iteration; returning True stops; Ctrl-C stops after the evaluation.

        ``checkpoint``: a folder (local path or fsspec URL) where the workers write their
        blocks and the driver the globals every ``checkpoint_every`` iterations
        (``checkpoint.py``; ``resume`` continues from it). A worker lost during the fit:
        its blocks are rebuilt on the workers left, their q(X) from the last checkpoint
        (without one, from the PCA start), the L-BFGS memory is cleared, and the fit goes on.
        """
        max_iters = _check_int("max_iters", max_iters, 0)
        if init_iters is None:
            init_iters = min(INIT_ITERS, max_iters // 4)
        init_iters = _check_int("init_iters", init_iters, 0, None)
        every = _check_int("checkpoint_every", checkpoint_every, 1)
        if checkpoint is not None:
            self._check_checkpoint_folder(str(checkpoint))
        parts = _Parts(self)
        history: list[float] = []
        start, evals, recoveries, t0 = self.iterations, 0, [], time.perf_counter()
        check = max(0, min(INIT_CHECK, init_iters) - start)
        held = max(0, init_iters - start - check)
        phases = [(check, True), (held, True), (None, False)]
        noise = self._glayout.slices["noise_variance"]
        reason, message = "max_iters", ""
        best = [-np.inf]  # the best bound of this fit; the parts remember its iterate

        def on_iter(f):
            self.iterations += 1
            history.append(-f)
            if -f >= best[0]:
                best[0] = -f
                self._keep()
            bar.update(self.iterations - start, f"bound {-f:.6g}")
            if checkpoint is not None and self.iterations % every == 0:
                self.save_checkpoint(str(checkpoint), bound=-f)
            if callback is not None and callback(self.iterations - start, -f):
                raise _Stop

        with ProgressBar(max_iters, "fit", enabled=progress) as bar:
            try:
                for k, (iters, hold) in enumerate(phases):
                    end = self.iterations + iters if iters is not None else start + max_iters
                    end = min(end, start + max_iters)
                    if end <= self.iterations or (k == 1 and not self._hold_helps()):
                        continue
                    mask = self._free_mask()
                    mask[noise] = mask[noise] & (not hold)
                    restarts = 0
                    while self.iterations < end:
                        self._gpart.mask = mask
                        before = history[-1] if history else -np.inf
                        try:
                            left = end - self.iterations
                            res = minimize_vlbfgs(parts, left, max(10 * left, 20), memory=self.memory,
                                                  callback=on_iter)
                        except (OSError, RuntimeError) as e:  # a worker lost? (Dask raises these)
                            recoveries.append(self._recover(e, len(recoveries)))
                            best[0] = -np.inf  # rebuilt blocks remember nothing: keep anew
                            continue
                        evals += res.nfev
                        if history and history[-1] < best[0]:  # as in process: on from the best
                            self._to_best()
                        reason = {0: "converged", 2: "stalled"}.get(res.status, "max_iters")
                        message = res.message
                        # as the in-process fit (``optimize.Optimisation.run``): an early end
                        # (ftol, a failed line search) starts L-BFGS again, memory cleared, for
                        # as long as that gains something
                        gained = bool(history) and history[-1] - before > RESTART_GAIN * max(1.0, abs(before))
                        if res.status not in (0, 2) or not gained or restarts >= MAX_RESTARTS:
                            break
                        restarts += 1
                    if reason in ("converged", "stalled") and k == 2:
                        break
            except _Stop:
                reason = "callback"
            except KeyboardInterrupt:
                reason = "interrupted"
            finally:
                self._gpart.mask = None
        if reason in ("callback", "interrupted") and history and history[-1] < best[0]:
            self._to_best()
        self.fit_info = dict(iterations=self.iterations - start, evaluations=evals, reason=reason,
                             message=message, bound=max(best[0], history[-1]) if history else self.elbo(),
                             history=history, recoveries=recoveries, seconds=time.perf_counter() - t0)
        return self

    def _recover(self, error: BaseException, done: int) -> dict:
        """Rebuild the blocks of lost workers (``fit``'s docstring), or raise ``error`` when
        no block was lost (it was not a worker's loss) or after ``MAX_RECOVERIES``."""
        lost = self._blocks.find_lost()
        if not lost or done >= MAX_RECOVERIES:
            raise error
        self._ops = []
        self._blocks.replace(lost)
        self._all("centre", self.Y_mean, self._groups_info, only=lost)
        if self._checkpoint is None and self._init_V is None:
            raise RuntimeError(f"{len(lost)} block(s) of rows were lost with their worker and cannot be rebuilt: "
                               "there is no checkpoint (fit with checkpoint=FOLDER)") from error
        if self._checkpoint is not None:
            folder, k = self._checkpoint
            self._all("restore", per_block={i: (folder, i, k) for i in lost}, only=lost)
            source = f"checkpoint of iteration {k}"
        else:
            pv = self._prior_values(self._globals())
            self._all("init_latent", per_block={i: (self._init_V, self.seed, i, pv) for i in lost}, only=lost)
            source = "the PCA start (no checkpoint)"
        return dict(iteration=self.iterations, blocks=lost, rows=int(sum(self.block_rows[i] for i in lost)),
                    source=source, error=f"{type(error).__name__}: {error}")

    # --- checkpoints ---------------------------------------------------------------------------
    def _identity(self) -> dict:
        """What a checkpoint must match to be this model's (``checkpoint.check_same_model``)."""
        from ..io import kernel_spec

        return dict(N=int(self.N), D=int(self.D), Q=int(self._Q), M=int(self.num_inducing),
                    kernel=kernel_spec(self.kernel), rows=[int(r) for r in self.block_rows])

    def save_checkpoint(self, folder: str, bound: float | None = None) -> None:
        """Write a checkpoint of the current iterate to ``folder`` (module ``checkpoint``):
        the workers their blocks, then the driver the globals and meta.json."""
        from .. import __version__

        k = self.iterations
        self._all("checkpoint", per_block=[(folder, i, k) for i in range(len(self._blocks))])
        meta = dict(self._identity(), bgplvm=__version__, seed=self.seed, memory=self.memory,
                    data=self.data_source, bound=None if bound is None else float(bound),
                    frozen=sorted(self.frozen), **self._checkpoint_meta())
        arrays = {"x": self._gpart.x, "Y_mean": self.Y_mean, **self._checkpoint_arrays()}
        ckpt.write_global(folder, k, meta, arrays)
        self._checkpoint = (folder, k)

    def _checkpoint_meta(self) -> dict:
        """What ``resume`` needs to build the model again (besides ``_identity``)."""
        return {"model": "static"}

    def _checkpoint_arrays(self) -> dict:
        return {}

    def _check_checkpoint_folder(self, folder: str) -> None:
        """A folder holding a checkpoint of another model, or a later one of this model that
        this model did not come from, is refused (it would be overwritten)."""
        try:
            meta = ckpt.read_meta(folder)
        except FileNotFoundError:
            return
        ckpt.check_same_model(meta, **self._identity())
        if meta["iteration"] > self.iterations and self._checkpoint != (folder, meta["iteration"]):
            raise ValueError(f"{folder} holds a checkpoint of iteration {meta['iteration']} of a model like this one: "
                             "continue it with DistributedGPLVM.resume(folder) (bgplvm fit --resume) or "
                             "checkpoint to another folder")

    @classmethod
    def resume(cls, folder: str, Y=None, client="local", memory: int | None = None) -> "Training":
        """The model of the last checkpoint in ``folder`` (static or dynamical), its rows
        (``Y``, or the file the checkpoint names) dealt to the workers in the checkpoint's
        blocks (``checkpoint.resume``). ``fit`` then goes on from there (its L-BFGS memory
        starts empty)."""
        return ckpt.resume(folder, Y, client, memory)

    def _hold_helps(self) -> bool:
        """As ``BayesianGPLVM._hold_helps``: go on holding the noise only while dF/d noise < 0."""
        self._gpart.mask = None
        self._direction(np.zeros(self.memory), np.zeros(self.memory), 0.0)
        _, out = self._evaluate(0.0)
        return float(-out["g"][self._glayout.slices["noise_variance"]][0]) < 0.0


class _Parts:
    """The model's blocks and the driver's part, as ``vlbfgs.Parts``."""

    def __init__(self, model):
        self.m = model

    def direction(self, a, b, c):
        self.m._direction(a, b, c)

    def perturb(self, k):
        self.m._perturb(k)

    def trial(self, stp):
        return self.m._trial(stp)

    def accept(self):
        return self.m._accept()

    def commit(self, slot):
        self.m._commit(slot)
