"""``bgplvm reproduce oil-missing``: its masks, baselines and PPCA start, and a --quick smoke
run that writes its files (a few seconds; never GPy)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bgplvm.reproduce import EXPERIMENTS, Context, run
from bgplvm.reproduce import oil_missing as om

from mirror import find_mirror


def test_masks_follow_the_stated_patterns():
    h = om.random_mask((1000, 12), 0.5, seed=3)
    assert abs(h.mean() - 0.5) < 0.02 and not h.all(1).any()
    b = om.block_mask((1000, 12), 20, 4, seed=3)
    assert b.sum() == 1000 * 4 and (b.sum(1) == 4).all()
    for rows in np.split(np.arange(1000), 20):  # one column set per block of 50 consecutive rows
        assert (b[rows] == b[rows[0]]).all()
    assert (om.make_mask(om.settings(False)[1], (1000, 12), 0) == om.make_mask(om.settings(False)[1], (1000, 12), 0)).all()


def test_knn_chooses_k_without_the_hidden_entries():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 2))
    Y = np.c_[X, X @ rng.standard_normal((2, 4))] + 0.01 * rng.standard_normal((300, 6))
    hidden = om.random_mask(Y.shape, 0.2, seed=1)
    out = om.knn_impute(Y, hidden, seed=2, k_max=8)
    assert 1 <= out["k_cv"] <= 8 and out["rmse_oracle"] <= out["rmse"]
    assert np.allclose(out["imputed"][~hidden], Y[~hidden])
    assert out["rmse"] < 0.5 * np.sqrt(np.mean((om.column_mean_impute(Y, hidden) - Y)[hidden] ** 2))
    # the choice of k depends on the observed entries only
    Y2 = np.where(hidden, 100.0, Y)
    assert om.knn_impute(Y2, hidden, seed=2, k_max=8)["k_cv"] == out["k_cv"]


def test_ppca_fill_recovers_a_low_rank_matrix_and_its_likelihood_rises():
    rng = np.random.default_rng(1)
    Y = rng.standard_normal((400, 2)) @ rng.standard_normal((2, 8)) + 0.05 * rng.standard_normal((400, 8))
    hidden = om.random_mask(Y.shape, 0.3, seed=2)
    mu = np.nanmean(np.where(hidden, np.nan, Y), 0)
    Yc = np.where(hidden, 0.0, Y - mu)
    filled, ll = om.ppca_fill(Yc, ~hidden, q=2, iters=30)
    assert np.all(np.diff(ll) > -1e-6)  # EM never lowers the observed-data likelihood
    assert np.allclose(filled[~hidden], Yc[~hidden])
    assert np.sqrt(np.mean((filled + mu - Y)[hidden] ** 2)) < 0.15


def test_quick_run_writes_its_files(tmp_path):
    mirror = find_mirror("oil/DataTrn.txt")
    if mirror is None:
        pytest.skip("oil not in the offline mirror")
    assert "oil-missing" in EXPERIMENTS
    res = run("oil-missing", Context(out_dir=tmp_path, quick=True, verbose=False, mirror=str(mirror)))
    folder = tmp_path / "oil-missing"
    data = json.loads((folder / "result.json").read_text())
    assert data["quick"] and len(data["tables"]) == 3
    rows = data["numbers"]["settings"]
    assert [r["key"] for r in rows] == ["random30", "blocks"]
    assert all(r["rmse_ours"] > 0 and r["rmse_gpy"] is None and r["gpy"] == "not run (--quick)" for r in rows)
    assert len(data["numbers"]["init_comparison"]) == 2
    assert all((folder / f).stat().st_size > 1000 for f in res.figures)
    md = (folder / "table.md").read_text()
    assert "Quick smoke run" in md and "oracle" in md and "no experiment with missing training outputs" in md
    assert "oil-missing" in (tmp_path / "REPORT.md").read_text()
