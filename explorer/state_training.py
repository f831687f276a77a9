"""The training part of the explorer's state: the settings of the next fit, and the fit
running in a worker process (``train_worker.WorkerTrainingJob``), whose progress
``poll()`` copies into parameters on the session's own thread.

``TrainingState`` is one of the parts ``ExplorerState`` (state.py) is composed of; a
finished fit is installed with ``set_model`` (``state_model``).
"""

from __future__ import annotations

import time

import param

from .inference import count
from .latent import noise_only_note
from .train_worker import WorkerTrainingJob
from .user_input import UserError

#: Training runs that are started from the page are capped at this many iterations.
MAX_TRAIN_ITERS = 20000

KERNELS = ["rbf", "rbf+bias+white", "rbf+white", "linear", "linear+bias+white"]
PRIORS = ["static", "dynamical"]
TIME_KERNELS = ["matern32", "rbf", "matern52", "rbf+white", "matern32+white", "periodic+white"]



class TrainingState(param.Parameterized):
    """What the next fit will be, and how the current (or last) one is going."""

    # training configuration
    latent_dim = param.Integer(default=5, bounds=(1, 30))
    num_inducing = param.Integer(default=25, bounds=(2, 500))
    kernel = param.Selector(default="rbf", objects=KERNELS)
    max_iters = param.Integer(default=300, bounds=(1, MAX_TRAIN_ITERS))
    prior = param.Selector(default="static", objects=PRIORS,
                           doc="static: p(X) = N(0, I); dynamical: a GP prior over time (needs time stamps)")
    time_kernel = param.Selector(default="matern32", objects=TIME_KERNELS)

    # training status
    training = param.Boolean(default=False)
    bound_history = param.List(default=[], doc="[(iteration, bound, phase), ...] of the current/last fit")
    train_status = param.String(default="")

    def __init__(self, **params):
        super().__init__(**params)
        self._job: WorkerTrainingJob | None = None

    def start_training(self) -> WorkerTrainingJob:
        if self.dataset is None:
            raise UserError("load a data set first")
        if self._job is not None and not self._job.done.is_set():
            raise UserError("a model is already training; stop it first")
        ds = self.dataset
        dynamical = self.prior == "dynamical"
        if dynamical and ds.times is None:
            raise UserError("a dynamical model needs time stamps: this data set has none "
                            "(upload an .npz with a 't' array, or choose the static prior)")
        Q = min(self.latent_dim, 30)
        M = min(self.num_inducing, ds.N)
        config = dict(latent_dim=Q, num_inducing=M, kernel=self.kernel, seed=0)
        self._job = WorkerTrainingJob(ds, config, int(self.max_iters), dynamical=dynamical,
                                      time_kernel=self.time_kernel).start()
        what = f"dynamical ({self.time_kernel} in time)" if dynamical else "static"
        with param.parameterized.batch_call_watchers(self):
            self.training = True
            self.bound_history = []
            self.error = ""
            self.train_status = (f"Starting a worker: {what} model, Q={Q}, M={M}, kernel {self.kernel}, "
                                 f"{self.max_iters} iterations...")
            # the line at the top said how the previous fit ended, as if of this one
            self.info = f"Training a {what} model on {ds.name} (progress in 2. Train)."
        return self._job

    def stop_training(self) -> None:
        if self._job is not None:
            self._job.stop()
            self.train_status = "Stopping after the current iteration..."

    def poll(self) -> bool:
        """Copy training progress into parameters (call on the session's thread).
        Returns True while a job is running."""
        job = self._job
        if job is None:
            return False
        hist = job.snapshot()
        if job.queued and not job.done.is_set():
            msg = "Queued: other sessions are training; this fit starts when a trainer is free..."
            if self.train_status != msg:
                self.train_status = msg
            return True
        if len(hist) != len(self.bound_history):
            it, bound, phase = hist[-1]
            with param.parameterized.batch_call_watchers(self):
                self.bound_history = hist
                self.train_status = (f"Iteration {it} / {job.max_iters} ({phase} phase), "
                                     f"bound {bound:,.2f}, {time.perf_counter() - job.t_start:.1f} s")
        if job.starved():
            done = f"iteration {hist[-1][0]} so far" if hist else "no iteration yet"
            msg = (f"Waiting for CPU ({done}): other programs keep every core busy and the fit "
                   f"runs below them ({job.priority} priority); it goes on when a core is free.")
            if self.train_status != msg:
                self.train_status = msg
        if not job.done.is_set():
            return True
        self._job = None
        secs = (job.t_end or time.perf_counter()) - job.t_start
        if job.error:
            self.training = False
            self.train_status = "Training failed."
            self.error = f"Training failed: {job.error}"
            return False
        if job.model is None:  # stopped while it waited for a trainer: nothing to install
            with param.parameterized.batch_call_watchers(self):
                self.training = False
                self.train_status = "Stopped before training started."
                self.info = f"Training stopped before it started; {self._shown_model()}"
            return False
        n = hist[-1][0] if hist else 0
        self.set_model(job.model, job.dataset, trained_here=True)
        self.training = False
        self.train_status = (f"{'Stopped' if job.stopped else 'Finished'} after {count(n, 'iteration')} in "
                             f"{secs:.1f} s; bound {float(job.model.elbo()):,.2f}."
                             # Stop keeps the fit so far, in place of the model shown before
                             + (" The page shows this partly trained model; the one before can be opened "
                                "again in 1. Data." if job.stopped else ""))
        kind = "dynamical" if self.is_dynamical else "static"
        self.info = f"Trained a {kind} model on {self.dataset_name}: {self.train_status}" + noise_only_note(job.model)
        return False

    def _shown_model(self) -> str:
        """What the page shows, for a message: "the model shown is unchanged." or that there is none."""
        return "the model shown is unchanged." if self.model is not None else "there is no model yet."

    def shutdown(self) -> None:
        """Session closed: end any training worker now."""
        if self._job is not None:
            self._job.kill()
