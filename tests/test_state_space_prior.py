"""The dynamical prior in state-space form (``bgplvm.priors.state_space``) against the dense
form (``bgplvm.priors.dynamical``): the same q(X) marginals, KL, gradients and forecasts,
central differences of every new gradient, the limits (n = 1, 2; steps of 1e-9 and 1e9
lengthscales), the API (time_prior, with_time_prior, files) and real data."""

import io
import json
import zipfile

import numpy as np
import pytest

from gradcheck import assert_model_block_gradients, numerical_gradient
from mirror import require_data

from bgplvm import DynamicalGPLVM
from bgplvm.priors.dynamical import GaussianBlocks
from bgplvm.priors.state_space import Chains, StateSpaceQ
from bgplvm.state_space import state_space
from bgplvm.time_kernels import TimeKernel, make_time_kernel

EXACT = ["matern12", "matern32", "matern52", "matern32+white", "matern52+white+bias", "matern12+bias"]


def _times(sizes, rng, lo=0.1, hi=1.0):
    return [np.cumsum(rng.uniform(lo, hi, n)) for n in sizes]


def _kernel(spec, rng):
    k = make_time_kernel(spec)
    k.set_params(**{p: float(rng.uniform(0.5, 2.0)) for p in k.params})
    return k


def _problem(sizes, Q=3, seed=0):
    rng = np.random.default_rng(seed)
    ts = _times(sizes, rng)
    starts = np.cumsum([0] + list(sizes))
    N = int(starts[-1])
    return (rng, np.concatenate(ts), starts, rng.normal(size=(N, Q)),
            np.exp(2.0 * rng.normal(size=(N, Q))), rng.normal(size=(N, Q)), rng.normal(size=(N, Q)))


def _dense(tk, t, starts, mb, lam, gmu, gS):
    index = [np.arange(starts[b], starts[b + 1]) for b in range(len(starts) - 1)]
    mu, S, kl, chain = GaussianBlocks(index).q([tk.K(t[ix]) for ix in index], mb, lam)
    dmb, dlam, dKs = chain(gmu, gS)
    dth = {k: 0.0 for k in tk.params}
    for ix, dK in zip(index, dKs):
        for k, v in tk.grad(t[ix], dK).items():
            dth[k] += float(v)
    return mu, S, kl, dmb, dlam, dth


def _close(a, b, rtol):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert np.max(np.abs(a - b)) <= rtol * max(np.max(np.abs(b)), 1e-300), (a, b)


@pytest.mark.parametrize("spec", EXACT)
@pytest.mark.parametrize("sizes", [[1], [2], [9, 1, 23, 2], [1, 5, 3]])
def test_equals_the_dense_form(spec, sizes):
    """Marginals, KL and the chain rule (given the same dF_hat/dmu, dF_hat/dS) equal the dense
    form's to 1e-10, on unevenly spaced times, with one- and two-frame sequences."""
    rng, t, starts, mb, lam, gmu, gS = _problem(sizes)
    tk = _kernel(spec, rng)
    mu, S, kl, dmb, dlam, dth = _dense(tk, t, starts, mb, lam, gmu, gS)
    mu2, S2, kl2, chain = StateSpaceQ(Chains(t, starts)).q(state_space(tk), mb, lam)
    dmb2, dlam2, dth2 = chain(gmu, gS)
    _close(mu2, mu, 1e-10)
    _close(S2, S, 1e-10)
    assert kl2 == pytest.approx(kl, rel=1e-10, abs=1e-12)
    _close(dmb2, dmb, 1e-10)
    _close(dlam2, dlam, 1e-10)
    scale = max(abs(v) for v in dth.values())
    for k in tk.params:
        assert abs(dth2[k] - dth[k]) <= 1e-9 * scale, (k, dth2[k], dth[k])


@pytest.mark.parametrize("spec", EXACT + ["rbf", "periodic", "rbf+white", "periodic+bias"])
@pytest.mark.parametrize("sizes", [[1], [2], [6, 11]])
def test_gradients_by_central_differences(spec, sizes):
    """F = sum(a mu + b S) - KL of the state-space form (its own function, exact or not):
    the analytic gradient w.r.t. mu_bar, lambda and every time-kernel parameter against
    central differences."""
    rng, t, starts, mb, lam, a, b = _problem(sizes, Q=2, seed=1)
    tk = _kernel(spec, rng)
    opts = {"order": 8} if "periodic" in spec else {}  # a fixed order: F is smooth in l
    core = StateSpaceQ(Chains(t, starts))
    names = list(tk.params)

    def F(x, grad=False):
        n = mb.size
        tk.set_params(**{k: np.exp(v) for k, v in zip(names, x[2 * n:])})
        mu, S, kl, chain = core.q(state_space(tk, **opts), x[:n].reshape(mb.shape),
                                  np.exp(x[n:2 * n]).reshape(mb.shape), grad=grad)
        f = float(np.sum(a * mu) + np.sum(b * S) - kl)
        if not grad:
            return f
        dmb, dlam, dth = chain(a, b)
        lam_ = np.exp(x[n:2 * n])
        return f, np.concatenate([dmb.ravel(), dlam.ravel() * lam_,
                                  [dth[k] * float(tk.params[k]) for k in names]])

    x = np.concatenate([mb.ravel(), np.log(lam).ravel(), [np.log(float(tk.params[k])) for k in names]])
    f, g = F(x, grad=True)
    num = numerical_gradient(F, x, eps=1e-6)
    assert np.max(np.abs(g - num)) <= 1e-6 * max(1.0, np.max(np.abs(num))), np.max(np.abs(g - num))


@pytest.mark.parametrize("spec", ["matern32+white", "matern52+bias", "matern12"])
@pytest.mark.parametrize("scale", [1e-9, 1e9])
def test_extreme_time_steps_stay_finite(spec, scale):
    """Steps of 1e-9 and 1e9 lengthscales: A_n -> I or 0, Q_n -> 0 or P_inf; everything
    finite, q(X) still matches the dense form where the dense matrix is usable."""
    rng, t, starts, mb, lam, gmu, gS = _problem([12, 5], Q=2, seed=2)
    tk = _kernel(spec, rng)
    ell = float(tk.params["lengthscale"] if "lengthscale" in tk.params else
                [v for k, v in tk.params.items() if k.endswith("lengthscale")][0])
    t = np.concatenate([np.arange(12.0), np.arange(5.0)]) * scale * ell
    mu, S, kl, chain = StateSpaceQ(Chains(t, starts)).q(state_space(tk), mb, lam)
    dmb, dlam, dth = chain(gmu, gS)
    for v in (mu, S, kl, dmb, dlam, *dth.values()):
        assert np.all(np.isfinite(v))
    assert np.all(S > 0)
    if scale > 1 and "bias" not in spec:  # independent frames: S = 1 / (1 / k(0) + lambda)
        k0 = tk.Kdiag(t[:1])[0]
        _close(S, 1.0 / (1.0 / k0 + lam), 1e-12)


# --- the model ---------------------------------------------------------------------------------
def _data(seed=1):
    rng = np.random.default_rng(seed)
    t = np.concatenate([np.cumsum(rng.uniform(0.5, 1.5, 40)), np.cumsum(rng.uniform(0.5, 1.5, 25))])
    seq = np.r_[np.zeros(40, int), np.ones(25, int)]
    Y = np.c_[np.sin(t / 3), np.cos(t / 5), np.sin(t / 7)] + 0.1 * rng.normal(size=(65, 3))
    return Y, t, seq


@pytest.mark.parametrize("spec", ["matern32", "matern52+white+bias"])
def test_model_forms_agree_and_gradients_check(spec):
    Y, t, seq = _data()
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=5, time_kernel=spec, sequences=seq)
    assert m.time_prior == "state_space"
    m.unfreeze(*m.smooth_time_variances())
    d = m.with_time_prior("dense")
    assert d.time_prior == "dense" and np.array_equal(d._x, m._x)
    f1, g1 = m._bound(m._x)
    f2, g2 = d._bound(d._x)
    assert f1 == pytest.approx(f2, rel=1e-10)
    _close(g1, g2, 1e-8)
    # the bound's rounding noise here is ~7e-9 in either form (measured), so eps = 1e-6 leaves
    # the central difference ~7e-3 off; 1e-5 keeps it below the tolerance
    assert_model_block_gradients(m, eps=1e-5)
    # forecasts: inside, between and beyond the frames, at a training time, a new sequence
    t_new = np.array([t[3], t[3] + 0.1, t[39] + 2.0, t[0] - 1.0, 300.0])
    for sequence in (0, 1, None):
        for a, b in zip(m.latent_at(t_new, sequence), d.latent_at(t_new, sequence)):
            _close(a, b, 1e-9)
    a, b = m.latent_at(t[[5, 6]], 0), (m.latent_mean[[5, 6]], m.latent_variance[[5, 6]])
    _close(a[0], b[0], 1e-12)
    _close(a[1], b[1], 1e-12)
    for a, b in zip(m.forecast(t_new, 1), d.forecast(t_new, 1)):
        _close(a, b, 1e-9)


def test_time_prior_choice_and_errors():
    Y, t, seq = _data()
    kw = dict(latent_dim=2, num_inducing=4, sequences=seq)
    assert DynamicalGPLVM(Y, t, time_kernel="matern12+white", **kw).time_prior == "state_space"
    rbf = DynamicalGPLVM(Y, t, time_kernel="rbf", **kw)
    assert rbf.time_prior == "dense"  # auto: only exact forms
    assert "time_prior='dense'" in repr(rbf) and "time prior        dense" in rbf.summary()
    ss = DynamicalGPLVM(Y, t, time_kernel="rbf", time_prior="state_space", **kw)
    assert ss.time_prior == "state_space"
    assert "approximate: order 6" in ss.summary() and "max kernel error" in ss.summary()
    assert "exact, state dimension 2" in DynamicalGPLVM(Y, t, **kw).summary()
    with pytest.raises(ValueError, match="time_prior must be one of"):
        DynamicalGPLVM(Y, t, time_prior="kalman", **kw)

    class Cauchy(TimeKernel):
        name = "cauchy"

        def __init__(self):
            super().__init__(variance=1.0, lengthscale=1.0)

        def _k(self, r):
            return 1.0 / (1.0 + r * r)

        def _dk(self, r):
            return {"variance": 1.0 / (1.0 + r * r), "lengthscale": 0.0 * r}

    assert DynamicalGPLVM(Y, t, time_kernel=Cauchy(), **kw).time_prior == "dense"
    with pytest.raises(ValueError, match="cauchy.*matern32"):
        DynamicalGPLVM(Y, t, time_kernel=Cauchy(), time_prior="state_space", **kw)


def test_files_record_the_form_and_old_files_load_dense():
    Y, t, seq = _data()
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=4, sequences=seq)
    m.fit(max_iters=5, progress=False)
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    back = DynamicalGPLVM.load(buf)
    assert back.time_prior == "state_space" and back.elbo() == m.elbo()
    # a file of an earlier version: no "time_prior" in its prior spec
    buf.seek(0)
    with zipfile.ZipFile(buf) as z:
        members = {n: z.read(n) for n in z.namelist()}
    meta_arr = np.load(io.BytesIO(members["meta.json.npy"]))
    meta = json.loads(meta_arr.tobytes())
    del meta["prior"]["time_prior"]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n, v in members.items():
            if n == "meta.json.npy":
                b = io.BytesIO()
                np.save(b, np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
                v = b.getvalue()
            z.writestr(n, v)
    out.seek(0)
    old = DynamicalGPLVM.load(out)
    assert old.time_prior == "dense"
    assert old.elbo() == pytest.approx(m.elbo(), rel=1e-10)


def test_long_new_sequence_is_reconstructed_in_linear_form():
    """A new sequence of 10,000 frames (half of them with a missing output) gets its own
    state-space q(X*): no n* x n* matrix (the dense one would need 800 MB)."""
    Y, t, seq = _data()
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=5, sequences=seq)
    m.fit(max_iters=30, progress=False)
    n = 10_000
    ts = np.arange(n) * 0.5
    Ys = np.c_[np.sin(ts / 3), np.cos(ts / 5), np.sin(ts / 7)]
    Ys[::2, 1] = np.nan
    mean, var = m.reconstruct(Ys, ts, max_iters=5)
    assert mean.shape == (n, 3) and np.all(np.isfinite(mean)) and np.all(var[::2, 1] > 0)


# --- real data --------------------------------------------------------------------------------
def _capture_chain(m):
    """Wrap m.prior.q so that the next gradient evaluation records (gmu, gS)."""
    seen = {}
    q = m.prior.q

    def wrapped(values, grad=True):
        out = q(values, grad)
        if grad:
            chain = out.chain

            def rec(gmu, gS):
                seen["g"] = (gmu.copy(), gS.copy())
                return chain(gmu, gS)
            out.chain = rec
        return out

    m.prior.q = wrapped
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("asset,data", [("cmu35", "cmu35"), ("frey_video", "frey_faces")])
def test_shipped_models_forms_agree(asset, data):
    """The shipped CMU 35 (31 sequences) and Frey video (one 300-frame sequence) models:
    bound to 1e-8; the prior's marginals, KL and chain rule (given the same dF_hat/dmu,
    dF_hat/dS) to 1e-10; forecasts to 1e-6 (q(X*) to 1e-8).

    The whole-model gradients differ by up to ~1e-4 relative in single entries
    (kernel.variance): that is the conditioning of F_hat here, not the prior. Perturbing
    the dense form's own q(X) by 1e-14 relative moves its gradient by as much (measured
    1.2e-5 in the time lengthscale), so that comparison uses 1e-3."""
    require_data(data)
    from bgplvm.assets import load_asset

    d, _ = load_asset(asset)
    s = d.with_time_prior("state_space")
    seen = _capture_chain(d)
    f1, g1 = d._bound(d._x)
    f2, g2 = s._bound(s._x)
    assert f2 == pytest.approx(f1, rel=1e-8)
    _close(g2, g1, 1e-3)
    v = d._values()
    a, b = d.prior.__class__.q(d.prior, v), s.prior.q(v)
    _close(b.mu, a.mu, 1e-10)
    _close(b.S, a.S, 1e-10)
    assert b.kl == pytest.approx(a.kl, rel=1e-12)
    gmu, gS = seen["g"]
    ca, cb = a.chain(gmu, gS), b.chain(gmu, gS)
    for k in ca:
        _close(cb[k], ca[k], 1e-10)
    sid = d.prior.sequence_ids[min(3, len(d.prior.sequence_ids) - 1)]
    t_new = np.linspace(-0.5, 1.5, 30)
    for x, y in zip(s.forecast(t_new, sid), d.forecast(t_new, sid)):
        _close(x, y, 1e-6)
    for x, y in zip(s.latent_at(t_new, sid), d.latent_at(t_new, sid)):
        _close(x, y, 1e-8)


@pytest.mark.slow
def test_frey_video_as_one_sequence_of_1965_frames():
    """The Frey faces as one video sequence (1965 frames): both forms give the same bound,
    prior gradients and forecasts; the dense form needs 1965^3 work per latent dimension."""
    require_data("frey_faces")
    from bgplvm.datasets import load

    ds = load("frey_faces")
    Y = ds.Y.astype(float) / 255.0
    t = np.arange(Y.shape[0], dtype=float)
    s = DynamicalGPLVM(Y, t, latent_dim=3, num_inducing=15, time_kernel="matern32+white")
    assert s.time_prior == "state_space"
    d = s.with_time_prior("dense")
    seen = _capture_chain(d)
    f1, g1 = d._bound(d._x)
    f2, g2 = s._bound(s._x)
    assert f2 == pytest.approx(f1, rel=1e-8)
    v = d._values()
    a, b = d.prior.__class__.q(d.prior, v), s.prior.q(v)
    _close(b.mu, a.mu, 1e-9)
    _close(b.S, a.S, 1e-9)
    gmu, gS = seen["g"]
    ca, cb = a.chain(gmu, gS), b.chain(gmu, gS)
    for k in ca:
        _close(cb[k], ca[k], 1e-8)
    t_new = np.array([10.5, 1964.0, 1970.0, 2000.0])
    for x, y in zip(s.latent_at(t_new, 0), d.latent_at(t_new, 0)):
        _close(x, y, 1e-8)


def test_periodic_harmonics_are_fixed_when_the_model_is_built():
    """The number of harmonics of a periodic part is chosen once (for the starting
    lengthscale) and saved: re-chosen at each evaluation it would make the bound jump as the
    lengthscale moves."""
    Y, t, seq = _data()
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=4, sequences=seq,
                       time_kernel="periodic+white", time_prior="state_space")
    J = m.prior.state_space_options["periodic_order"]
    f0 = m.elbo()
    x = m.get_param_vector()
    name = "time_kernel.periodic.lengthscale"
    m.prior.time_kernel.set_params(**{"periodic.lengthscale": 0.3})
    assert m.prior.state_space().order == J  # the same state, whatever the lengthscale
    m.set_param_vector(x)
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    back = DynamicalGPLVM.load(buf)
    assert back.prior.state_space_options["periodic_order"] == J and back.elbo() == f0
    assert name in m.param_names


def test_new_sequence_objective_is_the_same_in_both_forms():
    """q(X*) of a new sequence (``infer_sequence(sequence=None)``): the state-space
    objective equals the dense one (value and gradient at the same point), and so do their
    starting points (the ridge solve by the smoother against the dense solve)."""
    from bgplvm.sequence_inference import SequenceObjective

    Y, t, seq = _data()
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=5, sequences=seq, time_kernel="matern32+white")
    m.fit(max_iters=20, progress=False)
    d = m.with_time_prior("dense")
    ts = np.cumsum(np.random.default_rng(4).uniform(0.5, 1.5, 12))
    Ys = np.c_[np.sin(ts / 3), np.cos(ts / 5), np.sin(ts / 7)]
    Ys[3:8, 1] = np.nan
    observed = ~np.isnan(Ys)
    Ys = np.where(observed, Ys, 0.0)
    a = SequenceObjective(m, Ys, observed, ts, None)
    b = SequenceObjective(d, Ys, observed, ts, None)
    assert a.state_space and not b.state_space
    _close(a.x0, b.x0, 1e-8)
    fa, ga = a(b.x0)
    fb, gb = b(b.x0)
    assert fa == pytest.approx(fb, rel=1e-10)
    _close(ga, gb, 1e-8)
