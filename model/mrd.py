"""Manifold Relevance Determination (MRD): several views of the same rows, one latent space.

Damianou, Ek, Titsias & Lawrence, "Manifold Relevance Determination" (ICML 2012). Views
Y^(v) (N x D_v, v = 1..V; the same N rows) share one q(X); each view has its own kernel
(its own ARD weights), inducing inputs and noise, and the bound is the sum of each view's
collapsed bound (FdFinal, over its observed entries: ``outputs.Outputs.bound``) minus the
latent prior's KL counted once:

    F = sum_v F_hat_v(q(X); kernel_v, Z_v, beta_v) - KL(q(X) || p(X)).

The latent prior is the same replaceable part as a single-view model's (``bgplvm.priors``);
with one view the model is ``BayesianGPLVM`` (``tests/test_mrd.py``: equal to 1e-12).

A latent dimension is *switched on* for a view when its ARD weight is a fair part of that
view's largest (``segmentation``: alpha_vq / max_q' alpha_vq' > threshold, the relative rule
of GPy's and svargplvm's MRD demos); it is *shared* by the views that switch it on together
and *private* to a view that alone does.

Starting (``init``): the views side by side, each scaled to unit total variance so that the
largest does not swamp the others, give q(X)'s means by PCA ("scaled_pca", the default), or
the first view alone does ("first_view"). Each view's kernel starts from its own data
(signal variance its variance, noise a hundredth of it: vargplvm's signal-to-noise), and the
first phase of ``fit`` holds every view's noise, as a single view's fit does.

Defaults, measured (``bgplvm reproduce mrd-toy``: three views of a known segmentation, 8, 5
and 40 columns, 10 seeds): inducing inputs per view recovered the segmentation in 5 (scaled
PCA start) and 6 (first view) of 10 fits, shared ones in 3 and 6: per view is the default.
The two starts differ by one fit, and the first view's depends on the views' order: the
scaled PCA is the default. On the pose / silhouette frames (``ankur_pose``, Q = 10,
M = 50, 1000 iterations; ``bgplvm reproduce mrd-pose``) both starts end with one or two
dimensions with large relative ARD weight private to each view and at most one shared: the
pose view, at a signal-to-noise ratio of several hundred, uses nearly every dimension (the
bound's gradient w.r.t. q(X)'s variances there is of order 100 even where its relative ARD
weight is below 0.01) and q(X)'s variances shrink to 1e-4-1e-2. Held-out training frames
(600 fitted, 300 held out) measured the rest: holding the noise for 500 iterations, holding
the signal variances too, fixing the pose's noise, Q = 5 or 6, the first view's start or
3000 iterations instead of 1000 left pose from silhouette at 3.7-5.1 per body point with the
GP mean at q(x*) (the best of 10 starts for x*: no better), against 3.16 for the nearest
training silhouette's pose. Most of that loss is q(x*)'s prior in the dimensions the
silhouette does not use (``mrd_inference``): ``reconstruct(..., undetermined="nearest")``
gave 3.04-3.12; the silhouette's own x* added nothing over its nearest training row's
q(x_n) (3.08-3.13). The default stays "prior" (the model's own answer, with its variances).
GPy's MRD, fitted alike, predicted the pose at q(x*) better than this model did (3.65 against
4.52 on the 418 test frames) and found a shared dimension: its start's inverse widths are
tiny (alpha_q = (0.1 frac_q)^2, a nearly linear mapping). ``widths="long"`` (alpha_q = 0.01
frac_q^2, frac_q the start's PCA variance over the first's) starts so: on the held-out frames
one dimension was then shared and the GP mean at q(x*) erred 3.73 (scaled PCA start) and
3.33 (first view) instead of 4.36 and 3.99; on mrd-toy it recovered the segmentation in 1
and 0 of 10 fits instead of 5 and 6: "vargplvm" (alpha_q = 5 / range(mu_q)^2) stays the
default.
"""

from __future__ import annotations

import copy
import warnings
from numbers import Integral

import numpy as np

from .dynamical import DynamicalGPLVM
from .gplvm import BayesianGPLVM, _check_int, init_kernel
from .init import init_params
from .io import register_model_class
from .kernels import Kernel, make_kernel
from .missing import column_variance, listed
from .mrd_calibration import ViewsCalibrated
from .outputs import Outputs
from .params import Block, ParamLayout
from .priors import LatentPrior, StaticPrior
from ._threads import blas_single_threaded, single_threaded_blas
from .transforms import IDENTITY, POSITIVE

#: the ways q(X) can start (module docstring)
INITS = ("scaled_pca", "first_view")
#: the kernels' starting inverse widths (module docstring)
WIDTHS = ("vargplvm", "long")
#: "long" widths: alpha_q = LONG_WIDTHS * frac_q^2 (frac_q the start's PCA variance over the first's)
LONG_WIDTHS = 0.01
#: inducing inputs of each view, or one set for all
INDUCING = ("per_view", "shared")
#: default relative ARD weight above which a latent dimension is on for a view
SEGMENTATION_THRESHOLD = 0.1


def check_views(views) -> tuple[list[str], list]:
    """(names, arrays) of ``views``: a dict name -> (N, D_v) array, or a list/tuple of arrays
    (named "view0", "view1", ...); at least one, all with the same number of rows."""
    if isinstance(views, dict):
        names, arrays = [str(k) for k in views], list(views.values())
    elif isinstance(views, (list, tuple)):
        names, arrays = [f"view{i}" for i in range(len(views))], list(views)
    else:
        raise TypeError(f"views must be a dict of name -> (N, D) array or a list of arrays, got "
                        f"{type(views).__name__}")
    if not arrays:
        raise ValueError("views is empty: give one (N, D_v) array per view")
    if len(set(names)) != len(names):
        raise ValueError(f"view names must differ, got {names}")
    for n in names:
        if not n or "." in n:
            raise ValueError(f"a view's name must be non-empty and without '.', got {n!r}")
    rows = [np.shape(a)[0] if np.ndim(a) >= 1 else 0 for a in arrays]
    if len(set(rows)) > 1:
        counts = ", ".join(f"{n}: {r}" for n, r in zip(names, rows))
        raise ValueError(f"the views must have the same rows (one per data point), got {counts}")
    return names, arrays


def view_start(kernels: dict, inducing: str, widths: str, start: dict, view_var: dict) -> dict:
    """Starting values of the views' parameters (``MRD`` and ``DistributedMRD``): each view's
    kernel from its own data variance ``view_var[v]`` (``init_kernel``; ``widths="long"``:
    inverse widths LONG_WIDTHS * frac_q^2), noise a hundredth of it, and the inducing inputs
    ``start["Z"]`` (one set, or a copy per view)."""
    from .gplvm import init_kernel

    values = {"Z": start["Z"]} if inducing == "shared" else {}
    if widths == "long":
        start = {**start, "alpha": LONG_WIDTHS * np.asarray(start["fracs"]) ** 2}
    for n, kern in kernels.items():
        init_kernel(kern, {**start, "data_var": view_var[n]})
        values.update({f"{n}.kernel.{k}": v for k, v in kern.params.items()})
        values[f"{n}.noise_variance"] = np.asarray(view_var[n] / 100.0)
        if inducing == "per_view":
            values[f"{n}.Z"] = start["Z"].copy()
    return values


def _view_kernels(kernel, names: list[str], Q: int) -> dict[str, Kernel]:
    """One kernel per view: a name or a ``Kernel`` (copied for each), or one of those per
    view (a list in the views' order, or a dict by name)."""
    if isinstance(kernel, dict):
        missing = [n for n in names if n not in kernel]
        if missing or len(kernel) != len(names):
            raise ValueError(f"kernel as a dict needs one entry per view {names}, got {list(kernel)}")
        given = [kernel[n] for n in names]
    elif isinstance(kernel, (list, tuple)):
        if len(kernel) != len(names):
            raise ValueError(f"kernel as a list needs one per view ({len(names)}), got {len(kernel)}")
        given = list(kernel)
    else:
        given = [kernel] * len(names)
    return {n: make_kernel(k if isinstance(k, str) else copy.deepcopy(k), Q) for n, k in zip(names, given)}


class MRD(ViewsCalibrated, BayesianGPLVM):
    """Several views of the same rows sharing one q(X) (module docstring).

    Parameters
    ----------
    views : dict or list
        name -> (N, D_v) array (NaN = missing; a row may miss a whole view but must be
        observed somewhere), or a list of arrays (named view0, view1, ...).
    latent_dim : int
        Q.
    num_inducing : int
        M per view (or in all, ``inducing="shared"``), <= N.
    kernel : str, Kernel, list or dict
        A kernel name or ``Kernel`` (copied for each view), or one per view.
    seed : int, optional
        Seed of the initialisation.
    inducing : {"per_view", "shared"}
        Each view its own Z (as svargplvm), or one Z (as GPy's MRD).
    init : {"scaled_pca", "first_view"}
        How q(X) starts (module docstring).
    widths : {"vargplvm", "long"}
        The RBF kernels' starting inverse widths: alpha_q = 5 / range(mu_q)^2, or
        alpha_q = 0.01 frac_q^2, nearly linear, as GPy's MRD starts (module docstring).
    client, chunks
        A Dask cluster (``BayesianGPLVM``'s): the model is then a
        ``bgplvm.distributed.DistributedMRD``, each block of rows with its rows of every view.
    """

    def __new__(cls, *args, client=None, chunks=None, **kwargs):
        if client is None:
            if chunks is not None:
                raise ValueError("chunks= is for a distributed model: pass client= as well")
            return object.__new__(cls)
        if cls is not MRD:
            raise NotImplementedError(f"{cls.__name__} does not run on Dask: only MRD (the static prior) does")
        from .distributed.mrd import DistributedMRD

        return DistributedMRD(*args, client=client, chunks=chunks, **kwargs)

    def __init__(self, views, latent_dim: int = 2, num_inducing: int = 20, kernel="rbf",
                 seed: int | None = 0, inducing: str = "per_view", init: str = "scaled_pca",
                 client=None, chunks=None, widths: str = "vargplvm"):
        names, arrays = check_views(views)
        self.view_names = names
        self.views = {n: Outputs(Y, name=n, empty_rows=True) for n, Y in zip(names, arrays)}
        N = self.views[names[0]].shape[0]
        empty = np.flatnonzero(~np.any([o.observed_mask.any(axis=1) for o in self.views.values()], axis=0))
        if empty.size:
            raise ValueError(f"{empty.size} row(s) have nothing observed in any view (rows {listed(empty)}): "
                             "there is nothing to place them by; drop them")
        Q = _check_int("latent_dim", latent_dim, 1)
        M = _check_int("num_inducing", num_inducing, 1, N, f" (the number of data points N={N})")
        if inducing not in INDUCING:
            raise ValueError(f"inducing must be one of {INDUCING}, got {inducing!r}")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        if widths not in WIDTHS:
            raise ValueError(f"widths must be one of {WIDTHS}, got {widths!r}")
        self.widths = widths
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
        self.kernels = _view_kernels(kernel, names, Q)
        self.inducing, self.init, self.seed = inducing, init, seed
        self.metadata: dict = {}
        self.fit_info: dict = {}
        self._Q = Q
        self._init_held = tuple(f"{n}.noise_variance" for n in names)
        with single_threaded_blas():
            start = self._initial_state(Q, M, np.random.default_rng(seed))
            self.prior: LatentPrior = self._make_prior(N, Q, start)
            self._layout = ParamLayout(self.prior.blocks() + self._model_blocks(M, Q))
            self._x = self._layout.pack({**self.prior.initial_values(start["mu"], start["S"]),
                                         **self._view_values(start)})
        self._cache: dict = {}

    # --- construction ---------------------------------------------------------------------
    def _initial_state(self, Q: int, M: int, rng: np.random.Generator) -> dict:
        """``init_params`` of the views side by side, each scaled to unit total variance
        ("scaled_pca"), or of the first view ("first_view"); plus each view's data variance."""
        outs = [self.views[n] for n in self.view_names]
        if self.init == "first_view":
            outs = outs[:1]
        scaled = []
        for o in outs:
            total = float(np.sum(column_variance(o.Yc, o.observed)))
            scaled.append(o.Yc / np.sqrt(total) if total > 0 else o.Yc)
        observed = np.hstack([o.observed_mask for o in outs])
        start = init_params(np.hstack(scaled), Q, M, rng, observed=None if observed.all() else observed)
        start["view_var"] = self._view_variances()
        return start

    def _view_variances(self) -> dict[str, float]:
        """{view: mean variance of its observed columns} (1 where it has none): each view's
        kernel and noise start from it."""
        out = {}
        for n, o in self.views.items():
            var = float(np.mean(column_variance(o.Yc, o.observed)))
            out[n] = var if var > 0 else 1.0
        return out

    def _make_prior(self, N: int, Q: int, init: dict) -> LatentPrior:
        return StaticPrior(N, Q)

    def _z_name(self, view: str) -> str:
        return "Z" if self.inducing == "shared" else f"{view}.Z"

    def _model_blocks(self, M: int, Q: int) -> list[Block]:
        blocks = [Block("Z", (M, Q), IDENTITY)] if self.inducing == "shared" else []
        for n in self.view_names:
            blocks += [] if self.inducing == "shared" else [Block(f"{n}.Z", (M, Q), IDENTITY)]
            blocks += [Block(f"{n}.kernel.{k}", v.shape, POSITIVE) for k, v in self.kernels[n].params.items()]
            blocks.append(Block(f"{n}.noise_variance", (), POSITIVE))
        return blocks

    def _view_values(self, start: dict) -> dict:
        """Each view's kernel from its data (``init_kernel``), inducing inputs and noise."""
        return view_start(self.kernels, self.inducing, getattr(self, "widths", "vargplvm"), start,
                          start["view_var"])

    def _sync_kernel(self, values: dict | None = None) -> None:
        values = self._values() if values is None else values
        for n in self.view_names:
            pre = f"{n}.kernel."
            self.kernels[n].set_params(**{k[len(pre):]: v for k, v in values.items() if k.startswith(pre)})

    # --- the bound ------------------------------------------------------------------------
    @blas_single_threaded
    def _bound(self, x: np.ndarray, grad: bool = True, free_only: bool = False):
        """sum_v F_hat_v - KL (module docstring) and its gradient w.r.t. the unconstrained x."""
        v = self._values(x)
        self._sync_kernel(v)
        free_only = free_only or self._fitting
        self.prior.skip_gradients = frozenset(self._layout.frozen) if free_only else frozenset()
        qx = self.prior.q(v, grad=grad)
        F, dmu, dS, grads = -qx.kl, 0.0, 0.0, {}
        for n in self.view_names:
            beta = 1.0 / float(v[f"{n}.noise_variance"])
            F_v, d = self.views[n].bound(self.kernels[n], qx.mu, qx.S, v[self._z_name(n)], beta, grad=grad)
            F += F_v
            if grad:
                dmu, dS = dmu + d.dmu, dS + d.dS
                z = self._z_name(n)
                grads[z] = grads.get(z, 0.0) + d.dZ
                grads[f"{n}.noise_variance"] = -beta ** 2 * d.dbeta
                grads.update({f"{n}.kernel.{k}": d.dtheta[k] for k in self.kernels[n].params})
        if not grad:
            return F, None
        grads.update(qx.chain(dmu, dS))
        return F, self._layout.chain(x, grads)

    def _hold_helps(self, x: np.ndarray) -> bool:
        """Hold the views' noise past ``INIT_CHECK`` iterations while some view would rather
        have less noise than held (``BayesianGPLVM._hold_helps``, view by view)."""
        if any(n in self._layout.frozen for n in self._init_held):
            return True
        _, g = self._bound(x)
        return any(float(g[self._layout.slices[n]][0]) < 0.0 for n in self._init_held)

    # --- reading the model ----------------------------------------------------------------
    @property
    def num_inducing(self) -> int:
        return self._layout.blocks[self._layout.names.index(self._z_name(self.view_names[0]))].shape[0]

    @property
    def ard_weights(self) -> dict[str, np.ndarray]:
        """{view: (Q,) ARD weights} (1 / lengthscale^2 for RBF, the variances for linear)."""
        self._sync_kernel()
        out = {}
        for n, k in self.kernels.items():
            if k.ard_weights is None:
                raise AttributeError(f"view {n!r}'s kernel has no ARD part (use rbf or linear)")
            out[n] = np.asarray(k.ard_weights, dtype=np.float64).copy()
        return out

    @property
    def noise_variance(self) -> dict[str, float]:
        """{view: noise variance}."""
        v = self._values()
        return {n: float(v[f"{n}.noise_variance"]) for n in self.view_names}

    @property
    def inducing_inputs(self) -> dict[str, np.ndarray]:
        """{view: (M, Q) inducing inputs} (one array for all with ``inducing="shared"``)."""
        v = self._values()
        return {n: np.array(v[self._z_name(n)]) for n in self.view_names}

    def segmentation(self, threshold: float = SEGMENTATION_THRESHOLD) -> "Segmentation":
        """Which latent dimensions each view switches on, which are shared and which private
        (module docstring): dimension q is on for view v when alpha_vq / max_q' alpha_vq' >
        ``threshold`` (default 0.1)."""
        if not 0 < threshold < 1:
            raise ValueError(f"threshold must be in (0, 1), got {threshold!r}")
        w = self.ard_weights
        on = {n: np.flatnonzero(a / a.max() > threshold) if a.max() > 0 else np.array([], dtype=int)
              for n, a in w.items()}
        return Segmentation.from_on(on, self.latent_dim, threshold, {n: a / a.max() for n, a in w.items()})

    def view(self, name: str) -> BayesianGPLVM:
        """The single-view model of view ``name`` at this model's q(X) (its means and
        variances), kernel, inducing inputs and noise: its ``predict``, ``impute``,
        ``predictive_variance`` and the rest are that view's under the shared latent space.
        Made once per parameter setting (fit the MRD model again, then ask again)."""
        if name not in self.views:
            raise KeyError(f"no view {name!r}; the views are {self.view_names}")
        return self._view_model(name)

    def _view_model(self, name: str) -> BayesianGPLVM:
        key = ("view", name)
        if key not in self._cache:
            self._sync_kernel()
            v = self._values()
            m = self._single_view(name)
            values = {**self._view_prior_values(m, v),
                      "Z": v[self._z_name(name)], "noise_variance": v[f"{name}.noise_variance"],
                      **{f"kernel.{k}": p for k, p in self.kernels[name].params.items()}}
            m._set_x(m._layout.pack(values))
            m.metadata = {"mrd_view": name}
            self._cache[key] = m
        return self._cache[key]

    def _single_view(self, name: str) -> BayesianGPLVM:
        """An unfitted single-view model of view ``name`` with this model's prior form."""
        return BayesianGPLVM(self.views[name], latent_dim=self.latent_dim, num_inducing=self.num_inducing,
                             kernel=self.kernels[name], seed=self.seed)

    def _view_prior_values(self, m: BayesianGPLVM, v: dict) -> dict:
        """The prior's parameters for view model ``m``: this model's own where ``m`` has the
        same prior (static, dynamical: then ``m``'s q(X) is this one exactly), else q(X)'s
        means and variances in ``m``'s prior (``initial_values``)."""
        names = [b.name for b in m.prior.blocks()]
        if type(m.prior) is type(self.prior) and all(n in v for n in names):
            return {n: v[n] for n in names}
        return m.prior.initial_values(self.latent_mean, self.latent_variance)

    # --- across views (model/mrd_inference.py) ------------------------------------------------
    def infer_latent(self, observed: dict, max_iters: int = 200, return_fit: bool = False):
        """q(x*) = N(mu_s, diag S_s) of new rows from the views observed (``observed``: view
        name -> (n*, D_v) array, NaN = missing; every row observed in some view), maximising
        the sum of the observed views' test bounds minus the KL once (``bgplvm.mrd_inference``).
        Returns (mu_s, S_s) (n*, Q), or with ``return_fit`` the ``testbound.LatentFit``."""
        from .mrd_inference import infer_views

        fit = infer_views(self, observed, max_iters=max_iters)
        return fit if return_fit else (fit.mu, fit.S)

    def infer_candidates(self, observed: dict, n_starts: int = 10, max_iters: int = 200, distinct: float = 1.0):
        """The distinct local optima of each row's q(x*) from ``n_starts`` starts (its nearest
        training rows in the observed views), best bound first: a ``mrd_inference.Candidates``
        (mu, S (n*, K, Q), log_density (n*, K), count (n*,)). A silhouette may fit several poses."""
        from .mrd_inference import infer_candidates

        return infer_candidates(self, observed, n_starts=n_starts, max_iters=max_iters, distinct=distinct)

    def log_density(self, observed: dict, max_iters: int = 200) -> np.ndarray:
        """(n*,) log p(y*_O | Y) ~ the test bound of each row's observed entries in all its
        observed views, at the q(x*) of ``infer_latent`` (eq:predictive1)."""
        return self.infer_latent(observed, max_iters=max_iters, return_fit=True).log_density

    def predict_views(self, observed: dict, target=None, max_iters: int = 200, undetermined: str = "prior",
                      threshold: float = SEGMENTATION_THRESHOLD, calibrated: bool = True) -> dict:
        """{view: (mean, variance) (n*, D_v)} of the views not observed (or of ``target``, a
        name or a list of names) at the q(x*) inferred from the observed ones. In the
        dimensions no observed view switches on (``segmentation(threshold)``) q(x*) is its
        prior ("prior"), or the q(x_n) of the training row nearest in the observed views
        ("nearest"): ``mrd_inference.fill_undetermined``. Where ``calibrate`` calibrated a
        target from these observed views, its variance is scaled (``calibrated=False``: not),
        with a warning when a simple baseline predicted it better there."""
        from .mrd_inference import fill_undetermined

        targets = [n for n in self.view_names if n not in observed] if target is None else (
            [target] if isinstance(target, str) else list(target))
        for t in targets:
            self.view(t)  # unknown names: KeyError naming the views
        fit = self.infer_latent(observed, max_iters=max_iters, return_fit=True)
        mu, S = fill_undetermined(self, observed, fit, undetermined, threshold)
        return {t: self._across(t, observed, mu, S, undetermined, calibrated) for t in targets}

    def _across(self, target: str, observed: dict, mu, S, undetermined: str, calibrated: bool):
        """(mean, variance) of view ``target`` at q(x*) = (mu, S) inferred from ``observed``,
        the variance scaled by the target's calibration if ``calibrated`` and one applies
        (``mrd_calibration.apply_views_calibration``), with its baseline warning."""
        from .mrd_calibration import apply_views_calibration
        from .mrd_inference import check_observed

        mean, var = self.view(target).predict(mu, S, calibrated=False)
        cal = self._calibration
        if not calibrated or cal is None or target not in cal.targets:
            return mean, var
        text = cal.targets[target].baseline_warning(target)
        if text is not None:
            warnings.warn(text, stacklevel=4)
        return mean, apply_views_calibration(self, target, check_observed(self, observed), mean, var, mu, S,
                                             undetermined)

    def reconstruct(self, observed: dict, target: str, max_iters: int = 200, undetermined: str = "prior",
                    threshold: float = SEGMENTATION_THRESHOLD, calibrated: bool = True):
        """(mean, variance) (n*, D_target) of view ``target`` given the observed views
        (``predict_views``, with its ``undetermined`` and ``threshold``); where ``target`` is
        itself partly observed, its observed entries are passed through with variance 0."""
        mean, var = self.predict_views(observed, target=target, max_iters=max_iters, undetermined=undetermined,
                                       threshold=threshold, calibrated=calibrated)[target]
        if target in observed:
            from .testbound import check_test_outputs

            Ys, seen = check_test_outputs(observed[target], self.views[target].shape[1], allow_empty_rows=True)
            mean, var = np.where(seen, Ys, mean), np.where(seen, 0.0, var)
        return mean, var

    def predict(self, Xnew, Xnew_var=None, include_noise: bool = True, view: str | None = None):
        """{view: (mean, variance) (n, D_v)} at latent points (``BayesianGPLVM.predict`` of
        each view), or that of one ``view``."""
        names = self.view_names if view is None else [view]
        out = {n: self.view(n).predict(Xnew, Xnew_var, include_noise=include_noise) for n in names}
        return out if view is None else out[view]

    def summary(self) -> str:
        seg = self.segmentation()
        lines = [repr(self), f"  bound             {self.elbo():.6g}"]
        for n in self.view_names:
            o = self.views[n]
            lines.append(f"  view {n!r:<12} D = {o.shape[1]}, noise {self.noise_variance[n]:.4g}"
                         + (f", {100 * o.missing_fraction:.1f}% missing" if o.missing_fraction else ""))
        lines += ["  " + line for line in seg.describe().splitlines()]
        if self._calibration is not None:
            lines += ["  intervals         " + line for line in self._calibration.describe().splitlines()]
            lines += ["  baseline          " + text for t, v in self._calibration.targets.items()
                      if (text := v.baseline_warning(t)) is not None]
        return "\n".join(lines)

    def __repr__(self) -> str:
        dims = ", ".join(f"{n}: {o.shape[1]}" for n, o in self.views.items())
        return (f"MRD(N={self.views[self.view_names[0]].shape[0]}, views=({dims}), latent_dim={self.latent_dim}, "
                f"num_inducing={self.num_inducing}, inducing={self.inducing!r})")

    # --- single-view calls that have no one meaning here -------------------------------------
    def _one_view(self, what: str):
        raise TypeError(f"MRD has {len(self.view_names)} views: {what} is a view's (m.view(name).{what}) "
                        f"or, across views, see MRD's methods")

    @property
    def Y(self):
        """{view: (N, D_v) training outputs}."""
        return {n: o.Y for n, o in self.views.items()}

    @property
    def outputs(self):
        self._one_view("outputs")

    def impute(self, calibrated: bool = True):
        """{view: (mean, variance)}: each view's missing entries (``BayesianGPLVM.impute``)."""
        return {n: self.view(n).impute(calibrated=calibrated) for n in self.view_names}

    # --- calibration across views (model/mrd_calibration.py) -----------------------------------
    def calibrate(self, target=None, observed=None, rows: int = 1000, folds: int = 5, level: float = 0.95,
                  method: str = "quantile", per_output: bool | None = None, seed: int = 0,
                  undetermined: str = "prior", groups=None, adaptive: bool = True):
        """Calibrate the intervals of views predicted from other views (``predict_views``,
        ``reconstruct``) on the training rows themselves (``bgplvm.mrd_calibration``):
        ``rows`` training rows, in ``folds``, have view ``target`` (a name, a list, or None:
        each view in turn) predicted from the views ``observed`` (default: all the others)
        with every view's q(u) recomputed without the fold's rows; the target's per-output
        sd scales match a nominal ``level`` interval (``method``, ``per_output``, ``adaptive``
        as ``BayesianGPLVM.calibrate``), for predictions made with ``undetermined``. Also
        measures k-NN and the column mean on the same entries (the predictions warn when one
        is better). ``groups`` (one label per training row) makes folds of whole groups.
        Returns the model's ``ViewsCalibration`` (``describe()``); ``save`` keeps it;
        ``m.calibration = None`` drops it."""
        from .mrd_calibration import calibrate_views

        if self._not_calibrated_because:
            raise TypeError(f"{type(self).__name__}.calibrate is not available: {self._not_calibrated_because}")
        self._calibration = calibrate_views(self, target=target, observed=observed, rows=rows, folds=folds,
                                            level=level, method=method, per_output=per_output, seed=seed,
                                            undetermined=undetermined, groups=groups, adaptive=adaptive)
        return self._calibration

    def _data_record(self) -> tuple[int, str]:
        """(sum_v D_v, the fingerprint of the views side by side): what a calibration records."""
        from .mrd_calibration import views_fingerprint

        return sum(o.shape[1] for o in self.views.values()), views_fingerprint(self)

    def _view_dims(self) -> dict:
        return {n: o.shape[1] for n, o in self.views.items()}

    # --- model files (``bgplvm.io``: npz + JSON, the views as arrays "Y.<name>") -------------
    def _file_outputs(self) -> dict:
        return {f"Y.{n}": o.Y for n, o in self.views.items()}

    def _file_args(self):
        from .io import kernel_spec

        return {"views": self.view_names, "kernels": [kernel_spec(self.kernels[n]) for n in self.view_names],
                "inducing": self.inducing, "init": self.init, "widths": getattr(self, "widths", "vargplvm")}, {}

    @classmethod
    def _from_file(cls, Y, common, args, arrays):
        views = {n: arrays[f"Y.{n}"] for n in args["views"]}
        return cls(views, latent_dim=common["latent_dim"], num_inducing=common["num_inducing"],
                   kernel=list(args["kernels"]), seed=common["seed"], inducing=args["inducing"], init=args["init"],
                   widths=args.get("widths", "vargplvm"))


class Segmentation:
    """The latent dimensions each view switches on (``MRD.segmentation``).

    on : {view: sorted dimensions};  shared : {tuple of views: dimensions on for exactly
    those views (two or more)};  private : {view: dimensions on for that view alone};
    off : dimensions no view uses;  relevance : {view: (Q,) alpha / max alpha};  threshold.
    """

    def __init__(self, on, shared, private, off, relevance, threshold):
        self.on, self.shared, self.private, self.off = on, shared, private, off
        self.relevance, self.threshold = relevance, threshold

    @classmethod
    def from_on(cls, on: dict, Q: int, threshold: float, relevance: dict) -> "Segmentation":
        users = {q: tuple(n for n in on if q in on[n]) for q in range(Q)}
        shared, private = {}, {n: [] for n in on}
        for q, who in users.items():
            if len(who) >= 2:
                shared.setdefault(who, []).append(q)
            elif len(who) == 1:
                private[who[0]].append(q)
        off = [q for q, who in users.items() if not who]
        return cls({n: [int(q) for q in v] for n, v in on.items()}, shared, private, off, relevance, threshold)

    def as_dict(self) -> dict:
        return {"threshold": self.threshold, "on": self.on,
                "shared": [{"views": list(k), "dims": v} for k, v in self.shared.items()],
                "private": self.private, "off": self.off,
                "relevance": {n: r.tolist() for n, r in self.relevance.items()}}

    def describe(self) -> str:
        lines = [f"segmentation (relative ARD weight > {self.threshold:g}):"]
        for who, dims in self.shared.items():
            lines.append(f"  shared by {' + '.join(who)}: dims {dims}")
        for n, dims in self.private.items():
            lines.append(f"  private to {n}: dims {dims if dims else 'none'}")
        lines.append(f"  off: dims {self.off if self.off else 'none'}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.describe()


class DynamicalMRD(MRD):
    """``MRD`` with the temporal prior p(X | t) of ``DynamicalGPLVM``: sequences seen in
    several views. ``t``, ``sequences``, ``time_kernel``, ``learn_time_variance``,
    ``time_prior`` and ``state_space_options`` as ``DynamicalGPLVM``'s; the views and the
    rest as ``MRD``'s. The prior is the single-view model's (dense or state-space form), so
    the bound is the views' collapsed bounds minus its KL once."""

    def __init__(self, views, t, latent_dim: int = 2, num_inducing: int = 20, kernel="rbf",
                 time_kernel="matern32", sequences=None, seed: int | None = 0, inducing: str = "per_view",
                 init: str = "scaled_pca", learn_time_variance: bool = False, time_prior: str = "auto",
                 state_space_options: dict | None = None):
        from .dynamical import check_times, resolve_time_prior
        from .time_kernels import make_time_kernel

        names, arrays = check_views(views)
        self.t, self.sequences = check_times(t, np.shape(arrays[0])[0], sequences)
        self._time_kernel_arg = time_kernel
        self._time_kernel = make_time_kernel(copy.deepcopy(time_kernel))
        self._state_space_options = dict(state_space_options or {})
        self.time_prior = resolve_time_prior(time_prior, self._time_kernel)
        super().__init__(dict(zip(names, arrays)), latent_dim=latent_dim, num_inducing=num_inducing,
                         kernel=kernel, seed=seed, inducing=inducing, init=init)
        if not learn_time_variance:
            self.freeze(*DynamicalGPLVM.smooth_time_variances(self))

    _new_prior = DynamicalGPLVM._new_prior
    _make_prior = DynamicalGPLVM._make_prior

    @property
    def time_kernel(self):
        self.prior.sync(self._values())
        return self.prior.time_kernel

    def _single_view(self, name: str) -> DynamicalGPLVM:
        """A view's model is a ``DynamicalGPLVM`` (its sequences play and forecast)."""
        return DynamicalGPLVM(self.views[name].Y, self.t, sequences=self.sequences, latent_dim=self.latent_dim,
                              num_inducing=self.num_inducing, kernel=self.kernels[name],
                              time_kernel=copy.deepcopy(self._time_kernel_arg), seed=self.seed,
                              time_prior=self.time_prior, state_space_options=self._state_space_options)

    def latent_at(self, t_new, sequence=0) -> tuple[np.ndarray, np.ndarray]:
        """q(X*) at times ``t_new`` of training sequence ``sequence`` (``DynamicalGPLVM.latent_at``)."""
        return DynamicalGPLVM.latent_at(self, t_new, sequence)

    def forecast(self, t_new, sequence=0, include_noise: bool = True) -> dict:
        """{view: (mean, variance) (n*, D_v)} at times ``t_new`` of ``sequence``: q(X*) from
        ``latent_at`` through each view's mapping."""
        mu, S = self.latent_at(t_new, sequence)
        return self.predict(mu, S, include_noise=include_noise)

    _not_calibrated_because = ("its rows are frames coupled through time, and inferring frames across views "
                               "through the time prior is not available (calibrate an MRD with the static prior)")

    def infer_latent(self, *args, **kwargs):
        raise TypeError("DynamicalMRD couples frames through time, and inferring new frames across views "
                        "through the time prior is not available: use latent_at / forecast for the training "
                        "sequences, or an MRD (static prior) to infer rows across views")

    infer_candidates = log_density = predict_views = reconstruct = infer_latent

    def __repr__(self) -> str:
        return "Dynamical" + super().__repr__()[:-1] + f", time_prior={self.time_prior!r})"

    def _file_args(self):
        args, arrays = super()._file_args()
        spec = self.prior.spec()
        args.update(time_kernel=spec["time_kernel"], time_prior=self.time_prior,
                    state_space_options=getattr(self.prior, "state_space_options", None) or None)
        return args, arrays

    @classmethod
    def _from_file(cls, Y, common, args, arrays):
        views = {n: arrays[f"Y.{n}"] for n in args["views"]}
        return cls(views, arrays["prior.t"], sequences=arrays["prior.sequences"], latent_dim=common["latent_dim"],
                   num_inducing=common["num_inducing"], kernel=list(args["kernels"]), seed=common["seed"],
                   inducing=args["inducing"], init=args["init"], time_kernel=args["time_kernel"],
                   time_prior=args["time_prior"], state_space_options=args.get("state_space_options"))


register_model_class(MRD)
register_model_class(DynamicalMRD)
