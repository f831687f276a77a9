"""Predictions of a distributed MRD model (``DistributedMRD``), without its training rows.

Prediction at latent points needs of each view only q(u)'s statistics (M x M and M x D_v
sums over the rows, ``predict.output_stats``), and the test bound of new rows from their
observed views needs the same plus the training q(x_n) and rows that test points start from
(the nearest in the observed views): a sample of ``predict.POOL_ROWS`` rows, as for a
single-view distributed model (all of them when there are fewer). ``view_stats`` gathers
these in three rounds (the blocks' sums of every view, with missing values their totals,
and the sample).

``ViewsView`` is what ``MRD``'s cross-view methods (``predict``, ``infer_latent``,
``infer_candidates``, ``log_density``, ``predict_views``, ``reconstruct``; ``mrd_inference``)
read of an ``MRD``, built from those statistics; its methods *are* ``MRD``'s, so the
distributed model's answers come from the same code as the in-process model's.
"""

from __future__ import annotations

import numpy as np

from ..gplvm import check_inputs
from ..mrd import MRD
from .predict import block_sums, output_stats, predict_from_stats


class _Shape:
    """A view's (rows, columns), where ``MRD`` reads ``views[name].shape``."""

    def __init__(self, rows: int, cols: int):
        self.shape = (int(rows), int(cols))


class _ViewStats:
    """The single-view model of one view at the shared q(X) (``MRD.view``), as far as the
    cross-view methods use it: its test statistics and ``predict``."""

    def __init__(self, stats):
        self.stats = stats

    def _test_stats(self):
        return self.stats

    def predict(self, Xnew, Xnew_var=None, include_noise: bool = True, calibrated: bool = False):
        """As ``BayesianGPLVM.predict``, uncalibrated (the cross-view calibration is applied by
        ``MRD._across``)."""
        X, S = check_inputs(Xnew, Xnew_var, self.stats.Q)
        return predict_from_stats(self.stats, X, S, include_noise)


class ViewsView:
    """The parts of an ``MRD`` its cross-view methods read, from each view's ``TrainingStats``
    (``stats``: {view: stats}, in the views' order, all with the same sample of rows)."""

    def __init__(self, stats: dict):
        self.view_names = list(stats)
        first = stats[self.view_names[0]]
        self.latent_dim = first.Q
        self.views = {n: _Shape(s.N, s.D) for n, s in stats.items()}
        self.kernels = {n: s.kernel for n, s in stats.items()}
        self._stats = {n: _ViewStats(s) for n, s in stats.items()}

    # the training q(X) test points start from: the statistics' sample of rows
    @property
    def latent_mean(self) -> np.ndarray:
        return self._stats[self.view_names[0]].stats.mu

    @property
    def latent_variance(self) -> np.ndarray:
        return self._stats[self.view_names[0]].stats.S

    def _view_model(self, name: str) -> _ViewStats:
        return self._stats[name]

    def _sync_kernel(self) -> None:
        """The kernels are the statistics' copies, at the model's values."""

    ard_weights = MRD.ard_weights
    segmentation = MRD.segmentation
    view = MRD.view
    predict = MRD.predict
    infer_latent = MRD.infer_latent
    infer_candidates = MRD.infer_candidates
    log_density = MRD.log_density
    predict_views = MRD.predict_views
    _across = MRD._across
    #: the distributed model's calibration (``views_view``)
    _calibration = None
    reconstruct = MRD.reconstruct


def view_stats(dm, seed: int = 0) -> dict:
    """{view: ``TrainingStats``} of the distributed MRD ``dm`` at its current parameters
    (module docstring)."""
    need = any(o.groups is not None for o in dm._outs.values())
    v, fw, tot, (mu, S, Yc, observed) = block_sums(dm, need, seed)
    Zs = dm._kernel_args(v)[0]
    out = {}
    for j, (n, a, b) in enumerate(dm._spans()):
        out[n] = output_stats(dm.kernels[n], Zs[j], float(v[f"{n}.noise_variance"]), dm._outs[n],
                              [r["views"][j] for r in fw], None if tot is None else [t[j] for t in tot],
                              (mu, S, Yc[:, a:b], observed[:, a:b]))
    return out


def views_view(dm, seed: int = 0) -> ViewsView:
    """``ViewsView`` of the distributed MRD ``dm`` at its current parameters."""
    view = ViewsView(view_stats(dm, seed))
    view._calibration = dm.calibration  # made in process on the same views (``MRD.calibrate``)
    view._params_fingerprint = dm._params_fingerprint
    return view
