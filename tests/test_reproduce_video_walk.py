"""The video and walk reproductions' protocol helpers (hold-out split, pixel masks, MSE,
k-NN against a brute-force reference, joint-angle RMSE) and their figure drawing."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm.reproduce import EXPERIMENTS, drawing, video, walk
from bgplvm.reproduce import cmu35_protocol as P


def test_registered():
    assert {"video", "walk"} <= set(EXPERIMENTS)


def test_split_holds_out_every_kth_frame():
    train, test = video.split(20, every=5, offset=2)
    assert test.tolist() == [2, 7, 12, 17]
    assert sorted(train.tolist() + test.tolist()) == list(range(20))


def test_observed_mask_half_of_every_row_seeded():
    m = video.observed_mask(6, 10, 0.5, seed=1)
    assert m.shape == (6, 10) and np.all(m.sum(1) == 5)
    assert np.array_equal(m, video.observed_mask(6, 10, 0.5, seed=1))
    assert len({r.tobytes() for r in m}) > 1  # a pattern per row
    with pytest.raises(ValueError):
        video.observed_mask(2, 10, 0.0, seed=0)


def test_mse_over_missing_entries_only():
    Y = np.zeros((2, 3))
    pred = np.array([[9.0, 1.0, 2.0], [3.0, 9.0, 9.0]])
    observed = np.array([[True, False, False], [False, True, True]])
    assert video.mse_missing(Y, pred, observed) == pytest.approx((1 + 4 + 9) / 3)


def test_knn_equals_brute_force():
    rng = np.random.default_rng(5)
    Y = rng.standard_normal((25, 8))
    Y_star = rng.standard_normal((5, 8))
    obs = video.observed_mask(5, 8, 0.5, seed=2)
    Y_star[~obs] = np.nan
    for k in (1, 3):
        out = video.knn_reconstruct(Y, Y_star, k)
        assert np.array_equal(out[obs], Y_star[obs])
        for i in range(5):
            d = [np.sum((Y[j, obs[i]] - Y_star[i, obs[i]]) ** 2) for j in range(25)]
            near = np.argsort(d)[:k]
            np.testing.assert_allclose(out[i, ~obs[i]], Y[near][:, ~obs[i]].mean(0))
    # k = 1 is the CMU protocol's nearest neighbour
    np.testing.assert_array_equal(video.knn_reconstruct(Y, Y_star, 1), P.nn_reconstruct(Y, Y_star, False))


def test_walk_angle_rmse_uses_the_50_angles_in_degrees():
    Y = np.zeros((2, 59))
    pred = np.zeros((2, 59))
    pred[0, :50] = np.radians(2.0)
    pred[:, 50:] = 100.0  # root features are not joint angles
    np.testing.assert_allclose(walk.angle_rmse_per_frame(Y, pred), [2.0, 0.0])
    # the table pools the frames: the root of the mean square, 2 / sqrt(2), not the mean 1
    assert walk.pooled_rmse(walk.angle_rmse_per_frame(Y, pred)) == pytest.approx(np.sqrt(2.0))


def test_figures_are_pngs(tmp_path):
    rng = np.random.default_rng(0)
    ims = [rng.uniform(0, 255, (28, 20)) for _ in range(3)]
    ims[1][0, 0] = np.nan
    drawing.image_grid([("a", ims), ("b", [None] + ims[1:])], ["1", "2", "3"], tmp_path / "g.png", 0, 255)
    P3 = rng.standard_normal((5, 3))
    conn = [(0, 1), (1, 2), (2, 3), (3, 4)]
    drawing.pose_strip([("x", "#000000", [(P3, None), (P3 + 1, np.full(5, 0.1))])], conn, ["t0", "t1"],
                       tmp_path / "s.png", title="t")
    for f in ("g.png", "s.png"):
        assert (tmp_path / f).read_bytes()[:4] == b"\x89PNG"


def test_estimate_period_finds_the_cycle():
    t = np.arange(90)
    Y = np.zeros((90, 59))
    Y[:, :50] = np.sin(2 * np.pi * t / 31)[:, None] * np.linspace(0.2, 1, 50)
    Y[:, 0] += 0.3 * np.sin(2 * np.pi * t / 15.5)  # a harmonic must not win
    assert walk.estimate_period(Y) == 31


def test_time_kernel_of_the_rows():
    from bgplvm.time_kernels import PeriodicTime, TimeSum

    assert walk.time_kernel("rbf", 33, 80) == "rbf"
    k = walk.time_kernel("periodic", 33, 80)
    assert isinstance(k, PeriodicTime) and float(k.params["period"]) == 33.0
    k = walk.time_kernel("rbf+periodic", 33, 80)
    assert isinstance(k, TimeSum) and [p.name for p in k.parts] == ["rbf", "periodic"]
    assert float(k.params["rbf.lengthscale"]) == 40.0
