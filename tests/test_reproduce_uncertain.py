"""The uncertain-input reproductions: the Mackey-Glass simulator solves its delay equation,
the semi-supervised protocol's helpers, and smoke runs (--quick) that write their files."""

import json

import numpy as np
import pytest

from bgplvm.reproduce import EXPERIMENTS, Context, run
from bgplvm.reproduce import mackey_glass as mg
from bgplvm.reproduce import semi_supervised as ss
from mirror import find_mirror


def test_mackey_glass_series_solves_the_delay_equation():
    h = 0.1
    x = mg.simulate(600, every=h, transient=200.0)  # sampled at the integration step
    lag = int(round(mg.DELAY / h))
    dx = (x[lag + 2:] - x[lag:-2]) / (2 * h)  # central differences at t = lag + 1 ...
    xt, xd = x[lag + 1:-1], x[1:-lag - 1]
    rhs = mg.ALPHA * xd / (1 + xd**mg.EXPONENT) - mg.BETA * xt
    assert np.max(np.abs(dx - rhs)) < 1e-3
    y = mg.simulate(300)
    assert np.all(np.isfinite(y)) and 0.2 < y.min() < y.max() < 1.5  # the chaotic attractor's range
    np.testing.assert_array_equal(y, mg.simulate(300))  # deterministic


def test_log_density_is_the_gaussian_one():
    assert mg.log_density(1.0, 0.0, 4.0) == pytest.approx(-0.5 * np.log(8 * np.pi) - 1 / 8)


def test_missing_mask_has_the_stated_share():
    """The stated fraction of the partial rows' entries is missing (with 15 features 10% is
    1.5 per row: 1 in half the rows, 2 in the others), never by rounding each row's count."""
    rng = np.random.default_rng(0)
    for p, counts in [(0.1, {1: 30, 2: 30}), (0.3, {4: 30, 5: 30}), (0.5, {7: 30, 8: 30}),
                      (0.4, {6: 60}), (0.9, {13: 30, 14: 30}), (1.0, {15: 60})]:
        mask = ss.missing_mask(60, 15, p, rng)
        assert mask.mean() == pytest.approx(p)
        k, n = np.unique(mask.sum(1), return_counts=True)
        assert dict(zip(k.tolist(), n.tolist())) == counts
    mask = ss.missing_mask(80, 39, 0.1, rng)  # the mocap version: 3.9 per row
    assert mask.mean() == pytest.approx(0.1)


def test_baselines():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 3))
    Y = X @ np.array([[1.0], [-2.0], [0.5]]) + 3.0
    Xm = X.copy()
    Xm[::4, 1] = np.nan
    np.testing.assert_allclose(ss.mlr_mean_imputed(X, Y, X[:5]), Y[:5], atol=1e-10)
    assert np.all(np.isfinite(ss.mlr_mean_imputed(Xm, Y, X[:5])))
    np.testing.assert_array_equal(ss.nearest_neighbour(X, Y, X[3:5] + 1e-9), Y[3:5])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mackey-glass", "semi-supervised"])
def test_quick_runs_write_their_files(tmp_path, name):
    assert name in EXPERIMENTS
    res = run(name, Context(out_dir=tmp_path, quick=True, verbose=False))
    folder = tmp_path / name
    data = json.loads((folder / "result.json").read_text())
    assert data["quick"] and data["tables"] and res.figures
    assert all((folder / f).stat().st_size > 1000 for f in res.figures)
    assert "Quick smoke run" in (folder / "table.md").read_text()
    assert (tmp_path / "REPORT.md").is_file()


@pytest.mark.slow
def test_quick_mocap_run(tmp_path):
    mirror = find_mirror("cmu_mocap_35/cmu35WalkJog.mat")
    if mirror is None:
        pytest.skip("CMU 35 data not in the offline mirror")
    res = run("semi-supervised-mocap", Context(out_dir=tmp_path, quick=True, verbose=False, mirror=str(mirror)))
    assert res.settings["n_frames"] > 330 and res.tables[0].rows


def test_ctrl_c_ends_a_reproduction_without_writing_its_result(tmp_path, monkeypatch, capsys, sigint_raises):
    """Ctrl-C in one of a reproduction's fits ends the command (exit 130) instead of going
    on and reporting numbers from the interrupted fit; no result is written."""
    import os
    import signal

    from bgplvm.reproduce.cli import main
    from bgplvm import BayesianGPLVM

    real_fit = BayesianGPLVM.fit

    def fit(self, *a, **k):
        k["callback"] = lambda p: p.iteration == 2 and os.kill(os.getpid(), signal.SIGINT)
        return real_fit(self, *a, **k)

    monkeypatch.setattr(BayesianGPLVM, "fit", fit)
    with pytest.warns(UserWarning, match="interrupted"):
        rc = main(["semi-supervised", "--quick", "--out", str(tmp_path)])
    assert rc == 130 and "interrupted" in capsys.readouterr().err
    assert not (tmp_path / "semi-supervised" / "result.json").exists()
    assert not (tmp_path / "REPORT.md").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_mackey_glass_verdict_follows_the_numbers():
    """The report's verdict is computed from the run: it names the method with the lowest
    error and the best density (ties named as ties), says whether the paper's claim holds,
    and compares (c) with (b), its start, and with (c'), the own-start fit."""
    a, b, c, d, e, own = mg.METHODS

    def run_of(rmse, lpd, noise=1e-6, nearby=None):
        seeds = list(range(len(rmse[a])))
        per_seed = {s: {m: {"rmse": rmse[m][s], "mean_log_density": lpd[m][s]} for m in mg.METHODS}
                    for s in seeds}
        facts = {s: {a: {}, b: {"noise_variance": noise}, c: {"noise_variance": 2 * noise, "Sigma_z_mean": 1e-6,
                                                              "q_variance_median": 1e-6}} for s in seeds}
        for s, (bound, near) in (nearby or {}).items():
            facts[s][b].update(bound=bound, bounds_nearby=near)
        return " ".join(mg.verdict(per_seed, facts, seeds))

    other = {d: [2.0, 2.0], e: [2.0, 2.0], own: [0.85, 1.5]}
    lpd = {a: [-2.0, -2.0], b: [-9.0, -9.0], c: [-1.0, -1.5], **other}
    text = run_of({a: [0.9, 0.9], b: [1.2, 1.3], c: [0.8, 0.95], **other}, lpd)
    assert "lowest mean 180-step RMSE, 0.875, is (c)'s; medians over the seeds:" in text
    assert "(c) has the lowest RMSE in 1 of 2 seeds" in text
    assert "gives the lower RMSE in 2 of 2 seeds and the higher mean log density in 2 of 2" in text
    assert "mean RMSE 1.18 (per seed 0.85, 1.5)" in text and "below both (a) and (b) in 1 of 2 seeds" in text
    assert "The bound is noisy" not in text
    text = run_of({a: [0.9, 0.9], b: [1.2, 1.3], c: [0.8, 0.95], **other}, lpd,
                  nearby={0: (331.8, [294.0, 267.0, 296.7]), 1: (296.6, [296.5, 296.7])})
    assert ("spreads by up to 29.7, and the bound a fit reports exceeds its neighbours' median by up to 37.8 "
            "(seed 0: 331.8 against 294; neighbours 267 to 296.7)") in text
    assert "holds in this run, and its mean log density is the best too" in text
    text = run_of({a: [0.9, 0.9], b: [1.2, 1.3], c: [0.8, 0.95], **other}, lpd,
                  nearby={0: (295.7, [295.69, 295.71]), 1: (296.6, [296.6, 296.6])})
    assert "The bound is smooth where these fits end" in text and "spreads by at most 0.02" in text
    assert "The bound is noisy" not in text
    assert "nearly deterministic (noise variance 2.0e-06 for (c) and 1.0e-06 for (b)" in text
    text = run_of({a: [0.9, 0.9], b: [1.2, 1.3], c: [0.9, 1.4], **other}, lpd, noise=1e-2)
    assert "RMSE, 0.9, is (a)'s" in text and "is not reproduced in this run (its mean log" in text
    assert "nearly deterministic" not in text and "Fitted variances: noise variance 2.0e-02" in text
    tie = {a: [0.9], b: [1.2], c: [0.9], d: [2.0], e: [2.0], own: [1.0]}
    text = run_of(tie, {m: v[:1] for m, v in lpd.items()})
    assert "RMSE, 0.9, is shared by (a) and (c);" in text and "lowest RMSE in 1 of 1 seed." in text
    assert "medians" not in text and "is not reproduced" in text
