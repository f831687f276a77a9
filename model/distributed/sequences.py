"""Test-time inference of new sequences with a distributed dynamical model.

A new sequence's frames are coupled through its own time prior only: given the training
statistics (``predict.training_stats``: M x M and M x D sums and a sample of q(X) to
start from) it is independent of the training rows and of every other new sequence. So
``DistributedDynamicalGPLVM.infer_sequence`` runs ``sequence_inference.infer_sequence`` on
the driver against a ``SequenceView`` of the model (what that function reads of a
``DynamicalGPLVM``, built from the statistics), and ``infer_sequences`` maps it over many
sequences on the workers, the view sent to each worker once.

New frames of a *training* sequence (``sequence=`` its id) are conditioned on its latent
path, which lives on one worker: that worker computes their conditional prior N(m, C)
(``RowBlock.conditional_prior``: n* x Q and n* x n*), and the fit runs on the driver as
for a new sequence (``infer_frames``, ``reconstruct_frames``). The path itself does not
leave the worker; neither does it for ``latent_at`` / ``forecast``.
"""

from __future__ import annotations

import copy

import numpy as np

from ..bound import posterior_from_stats
from ..dynamical import check_new_frames, check_times
from ..sequence_inference import conditioned_predict, infer_sequence
from ..testbound import check_test_outputs


class SequenceView:
    """The parts of a ``DynamicalGPLVM`` that new-sequence inference reads, from a
    distributed model's ``TrainingStats`` ``stats``, its time kernel (at its fitted values),
    time prior form ("dense" / "state_space") and state-space options."""

    def __init__(self, stats, time_kernel, form: str, options: dict):
        self.stats = stats
        self.time_kernel = time_kernel
        self.prior = _PriorView(form, time_kernel, options)
        self.latent_dim = stats.Z.shape[1]
        self.kernel, self.inducing_inputs, self.Y_mean = stats.kernel, stats.Z, stats.Y_mean
        self.noise_variance = 1.0 / stats.beta

    # the training q(X) that test frames start from: the statistics' sample of rows
    @property
    def latent_mean(self) -> np.ndarray:
        return self.stats.mu

    @property
    def latent_variance(self) -> np.ndarray:
        return self.stats.S

    def _test_stats(self):
        return self.stats

    def _column_stats(self) -> tuple:
        """As ``BayesianGPLVM._column_stats``: (Kuu, beta, Psi2g, col_group, PsiY)."""
        st = self.stats
        Psi2g = st.Psi2[None] if st.Psi2g is None else st.Psi2g
        return st.kernel.K(st.Z), st.beta, Psi2g, st.col_group, st.E

    def _posterior(self):
        st = self.stats
        return posterior_from_stats(st.kernel.K(st.Z), st.Psi2, st.beta, st.E)


class _PriorView:
    def __init__(self, form: str, time_kernel, options: dict):
        self.form, self.time_kernel, self.options = form, time_kernel, dict(options)

    def state_space(self):
        from ..state_space import state_space

        return state_space(self.time_kernel, **self.options)


def sequence_view(dm) -> SequenceView:
    """``SequenceView`` of the distributed dynamical model ``dm`` at its current parameters."""
    from .predict import training_stats

    stats = training_stats(dm)
    tk = copy.deepcopy(dm.time_kernel)
    pv = dm._prior_values(dm._globals())
    tk.set_params(**{k[len("time_kernel."):]: v for k, v in pv.items()})
    return SequenceView(stats, tk, dm.time_prior, dm._state_space_options)


def check_new_sequence(view: SequenceView, Y_star, t_star) -> tuple:
    """(Ys, observed, t_star) of a new sequence, checked as ``DynamicalGPLVM.infer_sequence``
    does."""
    Ys, observed = check_test_outputs(Y_star, view.stats.D)
    t_star, _ = check_times(np.atleast_1d(t_star), Ys.shape[0], name="t_star", rows="Y_star")
    return Ys, observed, t_star


def _reconstructed(view: SequenceView, fit, Ys, observed, active=None, condition: bool = True,
                   include_noise: bool = True) -> tuple:
    """(mean, var) (n*, D) of frames at their q(X*) ``fit``, as ``DynamicalGPLVM.fill_missing``:
    each output's q(u) conditioned on the frames' observed entries too
    (``sequence_inference.conditioned_predict``; ``condition`` False: the training
    statistics' q(u) alone), the variance scaled by the calibration ``active`` (``(scale,
    Calibration)`` or None; ``calibration.apply_calibration``, each frame's row factor
    from its observed entries); observed entries pass through, variance 0."""
    from ..calibration import apply_calibration
    from .predict import predict_from_stats

    if condition:
        mean, var = conditioned_predict(view, fit.mu, fit.S, Ys, observed, include_noise)
    else:
        mean, var = predict_from_stats(view.stats, fit.mu, fit.S, include_noise)
    var = apply_calibration(var, active, rows=(mean, Ys, observed))
    return np.where(observed, Ys, mean), np.where(observed, 0.0, var)


def infer_new_sequence(view: SequenceView, Y_star, t_star, max_iters: int = 500, progress: bool | None = False):
    """``SequenceFit`` of the frames Y_star (n*, D; NaN = missing) of a new sequence at times
    t_star (n*,) (``sequence_inference.infer_sequence``, sequence None)."""
    Ys, observed, t_star = check_new_sequence(view, Y_star, t_star)
    return infer_sequence(view, Ys, observed, t_star, None, max_iters, None, progress)


def reconstruct_new_sequence(view: SequenceView, Y_star, t_star, max_iters: int = 500, active=None):
    """(mean, var) (n*, D) of a new sequence's frames: its q(X*) (``infer_new_sequence``),
    then ``_reconstructed`` (``active``: the calibration to apply)."""
    Ys, observed, t_star = check_new_sequence(view, Y_star, t_star)
    fit = infer_sequence(view, Ys, observed, t_star, None, max_iters, None, False)
    return _reconstructed(view, fit, Ys, observed, active)


def _frames(dm, Y_star, t_star, sequence) -> tuple:
    """(view, Ys, observed, t_star, prior) of frames of a new sequence (``sequence`` None,
    prior None) or new frames of training sequence ``sequence`` (prior: their (m, C) from
    the worker that holds it)."""
    if sequence is not None:
        dm._sequence_block(sequence)  # an unknown id is named before the statistics are gathered
    view = sequence_view(dm)
    Ys, observed, t_star = check_new_sequence(view, Y_star, t_star)
    if sequence is None:
        return view, Ys, observed, t_star, None
    check_new_frames(t_star, dm.t[dm.sequences == sequence], sequence)
    return view, Ys, observed, t_star, dm._on_sequence("conditional_prior", sequence, t_star)


def infer_frames(dm, Y_star, t_star, sequence=None, max_iters: int = 500, progress: bool | None = False):
    """``SequenceFit`` of frames Y_star (n*, D; NaN = missing) at times t_star of a new
    sequence or of training sequence ``sequence`` of the distributed model ``dm``."""
    view, Ys, observed, t_star, prior = _frames(dm, Y_star, t_star, sequence)
    return infer_sequence(view, Ys, observed, t_star, sequence, max_iters, None, progress, prior=prior)


def reconstruct_frames(dm, Y_star, t_star, sequence=None, max_iters: int = 500, progress: bool | None = False,
                       condition: bool = True, calibrated: bool = True) -> tuple:
    """(mean, var) (n*, D) of frames Y_star at times t_star (``infer_frames``, then
    ``_reconstructed`` with ``dm``'s calibration if ``calibrated``)."""
    view, Ys, observed, t_star, prior = _frames(dm, Y_star, t_star, sequence)
    fit = infer_sequence(view, Ys, observed, t_star, sequence, max_iters, None, progress, prior=prior)
    return _reconstructed(view, fit, Ys, observed, dm._active_calibration(calibrated), condition)


def fill_frames(dm, fit, Y_star, condition: bool = True, include_noise: bool = True, active=None) -> tuple:
    """(mean, var) (n*, D) of frames Y_star at their q(X*) ``fit`` (``infer_sequence``), as
    ``DynamicalGPLVM.fill_missing``: ``_reconstructed`` from the gathered statistics."""
    from ..sequence_inference import check_fill

    view = sequence_view(dm)
    Ys, observed = check_fill(fit, Y_star, view.stats.D)
    return _reconstructed(view, fit, Ys, observed, active, condition, include_noise)


def _one(view, Y_star, t_star, max_iters, what, active=None):
    if what == "infer":
        return infer_new_sequence(view, Y_star, t_star, max_iters)
    return reconstruct_new_sequence(view, Y_star, t_star, max_iters, active)


def map_sequences(dm, sequences, what: str, max_iters: int = 500, active=None) -> list:
    """``infer_new_sequence`` ("infer") or ``reconstruct_new_sequence`` ("reconstruct", with
    the calibration ``active``) of each (Y_star, t_star) in ``sequences``, on the workers;
    results in the given order."""
    seqs = list(sequences)
    for k, item in enumerate(seqs):
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ValueError(f"sequences[{k}] must be a pair (Y_star, t_star), got {type(item).__name__}")
    view = sequence_view(dm)
    for Y_star, t_star in seqs:  # bad input is reported here, not as a worker's exception
        check_new_sequence(view, Y_star, t_star)
    shared = dm.client.scatter(view, broadcast=True)
    futures = [dm.client.submit(_one, shared, np.asarray(Y, dtype=np.float64), np.asarray(t, dtype=np.float64),
                                max_iters, what, active, pure=False) for Y, t in seqs]
    import distributed

    distributed.wait(futures, timeout=dm.timeout)  # TimeoutError past the model's timeout
    return dm.client.gather(futures)
