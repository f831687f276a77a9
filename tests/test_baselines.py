"""bgplvm.baselines: k-NN with cross-validated k and a Gaussian of its residual variance,
the baseline the model's predictions are compared with."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm.baselines import KNNBaseline
from bgplvm.metrics import gaussian_scores


def _manifold(N, D=6, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, N)
    W = rng.standard_normal((2, D))
    return np.c_[np.cos(t), np.sin(t)] @ W + noise * rng.standard_normal((N, D))


def _half(Y, seed=1):
    rng = np.random.default_rng(seed)
    miss = np.zeros(Y.shape, bool)
    for i in range(Y.shape[0]):
        miss[i, rng.permutation(Y.shape[1])[:Y.shape[1] // 2]] = True
    return np.where(miss, np.nan, Y), miss


def test_a_copy_of_a_training_row_is_filled_in_exactly_with_k_one():
    Y = _manifold(200, noise=0.0)
    kb = KNNBaseline(Y, ks=(1,))
    Ys, miss = _half(Y[:20])
    mean, var = kb.predict(Ys)
    assert np.allclose(mean, Y[:20]) and np.all(var[~miss] == 0) and np.all(var[miss] > 0)


def test_cross_validation_picks_more_neighbours_for_noisier_data_and_its_intervals_hold():
    clean = KNNBaseline(_manifold(600, noise=0.0))
    noisy = KNNBaseline(_manifold(600, noise=0.3))
    assert noisy.k > clean.k and clean.cv_rmse[clean.k] == min(clean.cv_rmse.values())
    Y = _manifold(1600, noise=0.3, seed=3)  # held-out rows of the same data
    kb = KNNBaseline(Y[:600])
    Ys, miss = _half(Y[600:])
    mean, var = kb.predict(Ys)
    s = gaussian_scores(mean, var, np.where(miss, Y[600:], np.nan))
    assert abs(s.coverage[0.95] - 0.95) < 0.03 and abs(s.coverage[0.5] - 0.5) < 0.05, s.coverage


def test_imputing_the_training_rows_never_uses_the_row_itself():
    """20 % of the entries missing at random: neighbours among the other rows beat the
    column mean by far, and a row that duplicates another is filled from it, not itself."""
    rng = np.random.default_rng(4)
    Y = _manifold(400, noise=0.02)
    Y[1] = Y[0]
    miss = rng.uniform(size=Y.shape) < 0.2
    miss[0] = False
    miss[1] = [True, False, True, False, True, False]
    Yh = np.where(miss, np.nan, Y)
    kb = KNNBaseline(Yh, hide=0.2)
    mean, var = kb.impute()
    assert np.all(mean[~miss] == Y[~miss]) and np.all(np.isfinite(mean))
    col = np.sqrt(np.mean((np.nanmean(Yh, 0) - Y)[miss] ** 2))
    assert np.sqrt(np.mean((mean - Y)[miss] ** 2)) < 0.3 * col
    one = KNNBaseline(Yh, hide=0.2, ks=(1,))
    assert np.allclose(one.impute()[0][1], Y[0])  # its twin, row 0, is its nearest other row


def test_bad_input_is_refused_saying_what():
    with pytest.raises(ValueError, match="at least 3 rows"):
        KNNBaseline(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="every column"):
        KNNBaseline(np.c_[np.ones(5), np.full(5, np.nan)])
    kb = KNNBaseline(_manifold(50))
    with pytest.raises(ValueError, match="shape"):
        kb.predict(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="observe at least one"):
        kb.predict(np.full((1, 6), np.nan))
