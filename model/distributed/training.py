"""Fitting a distributed model: the optimiser's parts, the fit, recovery from a lost
worker and checkpoints (the ``Training`` part of ``DistributedGPLVM``).

The fit is the vector-free L-BFGS of ``vlbfgs`` over the driver's part (the globals) and
the blocks' parts (q(X) of their rows): ``_direction`` and ``_commit`` are queued and sent
with the next forward round, ``_trial`` is one evaluation (``DistributedGPLVM._evaluate``),
``_accept`` one round of dot products.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np

from .._interrupt import aborts, caused_by_interrupt, deferred_interrupt
from ..gplvm import FIT_ITERS, INIT_CHECK, INIT_ITERS, _check_int
from ..linalg import CholeskyError
from ..optimize import MAX_RESTARTS, RESTART_GAIN, FitProgress
from ..progress import ProgressBar
from . import checkpoint as ckpt
from .faults import ClusterError, WorkerLost, where
from .vlbfgs import minimize_vlbfgs

log = logging.getLogger("bgplvm.distributed")

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
        bound it goes back to its best iterate, as in process. The same contract as
        ``BayesianGPLVM.fit``: ``callback(FitProgress)`` after each iteration, returning
        True stops; Ctrl-C stops after the iteration (twice: at once); ``fit_info`` has the
        same keys (``optimize.FIT_INFO_KEYS``).

        ``checkpoint``: a folder (local path or fsspec URL) where the workers write their
        blocks and the driver the globals at the fit's start and every ``checkpoint_every``
        iterations (``checkpoint.py``; ``resume`` continues from it). Workers that joined
        take blocks at a checkpoint (``fit_info["rebalances"]``). A worker lost during the
        fit: its blocks are rebuilt on the workers alive then, their q(X) from the last
        checkpoint (without one, from the PCA start), the L-BFGS memory is cleared, and
        the fit goes on (``fit_info["recoveries"]``, and a logged warning). A scheduler
        that does not answer, or workers that do not answer within the model's
        ``timeout``, stop the fit with a ``faults.ClusterError`` saying what to do.
        """
        max_iters = _check_int("max_iters", max_iters, 0)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be a function of a FitProgress, got {callback!r}")
        if init_iters is None:
            init_iters = min(INIT_ITERS, max_iters // 4)
        init_iters = _check_int("init_iters", init_iters, 0, None)
        every = _check_int("checkpoint_every", checkpoint_every, 1)
        if checkpoint is not None:
            checkpoint = str(checkpoint)
            self._check_checkpoint_folder(checkpoint)
        run = _Run(self, max_iters, callback, checkpoint, every)
        error = None
        with ProgressBar(max_iters, "fit", enabled=progress) as run.bar, deferred_interrupt() as run.interrupt:
            try:
                if checkpoint is not None and self._checkpoint != (checkpoint, self.iterations):
                    # the start: what a loss before the first periodic checkpoint goes back to
                    self._surviving(run, lambda: self.save_checkpoint(checkpoint))
                run.fit_from = self._checkpoint if checkpoint is not None else None
                self._phases(run, init_iters)
            except _Stop:
                run.reason = "callback" if not run.interrupted else "interrupted"
            except ClusterError as e:
                error = self._stopped_by(e)
            except BaseException as e:  # noqa: BLE001 - a callback's error, a second Ctrl-C
                error = e
            finally:
                self._gpart.mask = None
        aborted = error is not None and caused_by_interrupt(error)
        if error is not None:
            run.reason = "interrupted" if aborted else "error"
        if not isinstance(error, ClusterError) and run.history and run.history[-1] < run.best:
            self._to_best()  # stopped mid-way, as in process: the best iterate
        self.fit_info = run.info()
        if aborted:
            raise KeyboardInterrupt("fit interrupted (Ctrl-C twice): the model keeps the best point reached") from error
        if error is not None:
            raise error
        if run.interrupted:
            warnings.warn("fit interrupted: the model keeps the best point reached (Ctrl-C again stops at once)",
                          stacklevel=2)
            if aborts():
                raise KeyboardInterrupt("fit interrupted (Ctrl-C)")
        return self

    def _phases(self, run: "_Run", init_iters: int) -> None:
        """The fit's phases (``fit``): L-BFGS runs until each phase's end, started again
        after an early end that gained or a worker's loss."""
        start = run.start
        check = max(0, min(INIT_CHECK, init_iters) - start)
        held = max(0, init_iters - start - check)
        phases = [(check, True), (held, True), (None, False)]
        parts = _Parts(self, run)
        for k, (iters, hold) in enumerate(phases):
            end = self.iterations + iters if iters is not None else start + run.max_iters
            end = min(end, start + run.max_iters)
            if end <= self.iterations or (k == 1 and not self._surviving(run, self._hold_helps)):
                continue
            run.phase = "init" if hold else "main"
            mask = self._free_mask()
            for n in self._noise_names():
                noise = self._glayout.slices[n]
                mask[noise] = mask[noise] & (not hold)
            restarts = 0
            while self.iterations < end:
                self._gpart.mask = mask
                # after a recovery the run starts below the last bound: any iteration gains
                before = run.history[-1] if run.history and not run.recovered else -np.inf
                n0, run.recovered = len(run.history), False
                left = end - self.iterations
                try:
                    res = minimize_vlbfgs(parts, left, max(10 * left, 20), memory=self.memory, callback=run.on_iter)
                except (WorkerLost, OSError) as e:  # OSError: what Dask raises for a connection lost
                    run.recoveries.append(self._recover_all(e, run))
                    continue
                if run.history and run.history[-1] < run.best:  # as in process: on from the best
                    self._to_best()
                run.reason = {0: "converged", 2: "stalled"}.get(res.status, "max_iters")
                run.message = res.message
                # as the in-process fit (``optimize.Optimisation.run``): an early end (ftol, a
                # failed line search) starts L-BFGS again, memory cleared, while that gains
                gained = len(run.history) > n0 and (before == -np.inf or run.history[-1] - before
                                                    > RESTART_GAIN * max(1.0, abs(before)))
                if res.status not in (0, 2) or not gained or restarts >= MAX_RESTARTS:
                    break
                restarts += 1
            if run.reason in ("converged", "stalled") and k == 2:
                break

    def _surviving(self, run: "_Run", step):
        """``step()``, done again after recovering from a worker's loss during it."""
        while True:
            try:
                return step()
            except (WorkerLost, OSError) as e:
                run.recoveries.append(self._recover_all(e, run))

    def _recover_all(self, error: BaseException, run: "_Run") -> dict:
        """``_recover``, again while workers keep leaving during it (``MAX_RECOVERIES`` in all).
        Rebuilt blocks remember no best iterate: the fit keeps one anew (``run.best``)."""
        while True:
            try:
                rec = self._recover(error, len(run.recoveries), run.fit_from)
                run.best, run.recovered = -np.inf, True
                return rec
            except WorkerLost as again:
                if len(run.recoveries) >= MAX_RECOVERIES or again is error:
                    raise
                error = again
                run.recoveries.append(dict(iteration=self.iterations, blocks=again.blocks, workers=again.workers,
                                           rows=0, source="lost again while being rebuilt", to=[],
                                           error=f"{type(again).__name__}: {again}", seconds=0.0))

    def _recover(self, error: BaseException, done: int, fit_from=None) -> dict:
        """Rebuild the blocks of lost workers (``fit``'s docstring), or raise ``error`` when
        no block was lost (it was not a worker's loss) or after ``MAX_RECOVERIES``."""
        t0 = time.perf_counter()
        lost = self._blocks.find_lost()
        if not lost:
            raise error
        gone = sorted({self._blocks.where[i] for i in lost if self._blocks.where[i]} | set(getattr(error, "workers", ())))
        if done >= MAX_RECOVERIES:
            raise WorkerLost(f"{where(lost, gone)} lost: the fit gave up after {MAX_RECOVERIES} recoveries", gone,
                             lost) from error
        if self._checkpoint is None and self._init_V is None:
            raise WorkerLost(f"{where(lost, gone)} lost with their worker and cannot be rebuilt: there is no "
                             "checkpoint (fit with checkpoint=FOLDER)", gone, lost) from error
        self._ops = []
        self._blocks.replace(lost)
        self._all("centre", self.Y_mean, self._groups_info, only=lost)
        if self._checkpoint is not None:
            folder, k = self._checkpoint
            self._all("restore", per_block={i: (folder, i, k) for i in lost}, only=lost)
            source = f"checkpoint of iteration {k}"
            if self._checkpoint == fit_from:
                source += " (the start of this fit: no later checkpoint yet)"
        else:
            pv = self._prior_values(self._globals())
            self._all("init_latent", per_block={i: (self._init_V, self.seed, i, pv) for i in lost}, only=lost)
            source = "the PCA start (no checkpoint)"
        rec = dict(iteration=self.iterations, blocks=lost, rows=int(sum(self.block_rows[i] for i in lost)),
                   workers=gone, to=[self._blocks.where[i] for i in lost], source=source,
                   error=f"{type(error).__name__}: {error}", seconds=time.perf_counter() - t0)
        log.warning("bgplvm: %s lost at iteration %d; rebuilt on %s, their q(X) from the %s (%.1f s)",
                    where(lost, gone), rec["iteration"], ", ".join(sorted(set(rec["to"]))), source, rec["seconds"])
        return rec

    def _rebalance(self, moves: dict) -> dict:
        """Deal blocks to workers that joined (``moves``: block -> worker, ``Blocks.moves``):
        each moved block starts there with its optimiser's state (``Blocks.move``), so the
        fit goes on as it was (its queued calls reach the moved blocks with the next round)."""
        t0 = time.perf_counter()
        came_from = {i: self._blocks.where[i] for i in moves}
        self._blocks.move(moves)
        which = sorted(moves)
        self._all("centre", self.Y_mean, self._groups_info, only=which)
        rec = dict(iteration=self.iterations, blocks=which, rows=int(sum(self.block_rows[i] for i in which)),
                   workers=sorted(set(came_from.values())), to=[moves[i] for i in which],
                   seconds=time.perf_counter() - t0)
        log.info("bgplvm: %s moved to %s at iteration %d (%.1f s)", where(which, rec["workers"]),
                 ", ".join(sorted(set(rec["to"]))), self.iterations, rec["seconds"])
        return rec

    def _stopped_by(self, e: ClusterError) -> ClusterError:
        """``e`` again, its message saying where the fit stopped and what to do."""
        if self._checkpoint is not None:
            folder, k = self._checkpoint
            rows = "" if self.data_source else "Y=<the same rows>, "
            todo = (f"the checkpoint of iteration {k} in {folder} is whole: once the cluster answers, continue with "
                    f"BayesianGPLVM.resume({folder!r}, {rows}client=...).fit(...)")
        else:
            todo = "there is no checkpoint to continue from (fit with checkpoint=FOLDER to keep a fit's progress)"
        out = type(e)(f"{e}. The fit stopped at iteration {self.iterations}; {todo}", e.workers, e.blocks)
        out.__cause__ = e
        return out

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
    def resume(cls, folder: str, Y=None, client="local", memory: int | None = None,
               timeout: float | None = None) -> "Training":
        """The model of the last checkpoint in ``folder`` (static or dynamical), its rows
        (``Y``, or the file the checkpoint names: rows opened with ``open_rows`` or by
        ``bgplvm fit --data``; an array needs ``Y``) dealt to the workers in the
        checkpoint's blocks (``checkpoint.resume``). ``fit`` then goes on from there (its
        L-BFGS memory starts empty)."""
        return ckpt.resume(folder, Y, client, memory, timeout)

    def _noise_names(self) -> list[str]:
        """The global parameters held in the fit's first phase: the noise (each view's)."""
        return ["noise_variance"]

    def _hold_helps(self) -> bool:
        """As ``BayesianGPLVM._hold_helps``: go on holding the noise only while dF/d noise < 0
        (of some view: ``MRD._hold_helps``)."""
        self._gpart.mask = None
        self._direction(np.zeros(self.memory), np.zeros(self.memory), 0.0)
        _, out = self._evaluate(0.0)
        return any(float(-out["g"][self._glayout.slices[n]][0]) < 0.0 for n in self._noise_names())


class _Run:
    """One fit's state: its history and best bound, counts, recoveries and rebalances,
    and ``on_iter``, what happens after each iteration (checkpoint, callback, Ctrl-C)."""

    def __init__(self, model, max_iters: int, callback, checkpoint: str | None, every: int):
        self.m, self.max_iters, self.callback = model, max_iters, callback
        self.checkpoint, self.every = checkpoint, every
        self.start, self.t0 = model.iterations, time.perf_counter()
        self.history: list[float] = []
        self.best = -np.inf  # the best bound of this fit; the parts remember its iterate
        self.evaluations = self.rejected = self.held = 0
        self.recoveries: list[dict] = []
        self.rebalances: list[dict] = []
        self.reason, self.message, self.phase = "max_iters", "", "main"
        self.interrupted = False
        self.recovered = False  # blocks were rebuilt since the last L-BFGS run started
        self.interrupt = None  # ``_interrupt.InterruptRequest``
        self.bar = None
        self.fit_from = None  # (folder, iteration) of the checkpoint written at the start

    def on_iter(self, f: float) -> None:
        m = self.m
        m.iterations += 1
        self.history.append(-f)
        self.held += self.phase == "init"
        if -f >= self.best:
            self.best = -f
            m._keep()
        self.bar.update(m.iterations - self.start, f"bound {-f:.6g} [{self.phase}]")
        if self.checkpoint is not None and m.iterations % self.every == 0:
            m.save_checkpoint(self.checkpoint, bound=-f)
            moves = m._blocks.moves()
            if moves:  # workers joined: they take blocks now
                self.rebalances.append(m._rebalance(moves))
        if self.callback is not None:
            p = FitProgress(m.iterations - self.start, self.max_iters, self.evaluations, -f, self.phase,
                            time.perf_counter() - self.t0)
            if self.callback(p):
                raise _Stop
        if self.interrupt is not None and self.interrupt.requested:
            self.interrupted = True
            raise _Stop

    def info(self) -> dict:
        """``fit_info`` (the keys of ``optimize.FIT_INFO_KEYS``)."""
        m = self.m
        if self.history:
            bound = max(self.best, self.history[-1])
        else:  # no iteration: the bound where the fit started (unknown when the cluster failed)
            bound = m.elbo() if self.reason != "error" else np.nan
        return dict(iterations=m.iterations - self.start, evaluations=self.evaluations, rejected_steps=self.rejected,
                    stopped=self.reason in ("callback", "interrupted"), reason=self.reason, message=self.message,
                    bound=float(bound), history=self.history, held_iterations=self.held,
                    seconds=time.perf_counter() - self.t0, recoveries=self.recoveries, rebalances=self.rebalances)


class _Parts:
    """The model's blocks and the driver's part, as ``vlbfgs.Parts`` (counting the
    evaluations of ``run``)."""

    def __init__(self, model, run: _Run):
        self.m, self.run = model, run

    def direction(self, a, b, c):
        self.m._direction(a, b, c)

    def perturb(self, k):
        self.m._perturb(k)

    def trial(self, stp):
        self.run.evaluations += 1
        out = self.m._trial(stp)
        self.run.rejected += int(out[0] == _BAD_VALUE)
        return out

    def accept(self):
        return self.m._accept()

    def commit(self, slot):
        self.m._commit(slot)
