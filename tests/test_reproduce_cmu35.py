"""The CMU 35 reconstruction protocol (reproduce/cmu35_protocol.py): masks and the RA/SC
formulas on hand-made arrays, the nearest-neighbour baseline against a brute-force
reference, and the baselines on the real data (through the offline mirror) against the
paper's table."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm.reproduce import EXPERIMENTS
from bgplvm.reproduce import cmu35_protocol as P
from mirror import find_mirror


# ------------------------------------------------------------------ masks
def test_masks_follow_the_paper():
    legs, body = P.missing_mask("legs"), P.missing_mask("body")
    assert legs.shape == body.shape == (124, 59)
    assert not legs[:62].any() and not body[:62].any()  # frames 1..62 fully observed
    assert legs.sum() == 62 * 7 and body.sum() == 62 * 30
    assert np.flatnonzero(legs[62]).tolist() == list(range(7, 14))
    assert np.flatnonzero(body[-1]).tolist() == list(range(20, 50))
    Y = np.arange(124 * 59, dtype=float).reshape(124, 59)
    Ys = P.masked_test(Y, "legs")
    assert np.array_equal(np.isnan(Ys), legs) and np.array_equal(Ys[~legs], Y[~legs])
    assert not np.isnan(Y).any()  # the input is not modified
    with pytest.raises(ValueError, match="arms"):
        P.missing_mask("arms")


# ------------------------------------------------------------------ metrics
def test_ra_and_sc_formulas_on_hand_made_arrays():
    T, start = 5, 3
    cols = np.array([1, 3])
    scale = np.zeros(59)
    scale[cols + 9] = [2.0, 0.5]
    Y_true = np.zeros((T, 59))
    Y_pred = np.zeros((T, 59))
    d = np.pi / 180  # one degree
    Y_pred[start:, 1] = [1 * d, 3 * d]   # errors -1, -3 degrees in column 1
    Y_pred[start:, 3] = [2 * d, -4 * d]  # errors -2, +4 degrees in column 3
    Y_pred[:start] = 99.0                # observed frames are never read
    Y_pred[start:, 0] = 99.0             # nor other columns
    out = P.errors(Y_true, Y_pred, cols, scale, start=start)
    assert out["RA"] == pytest.approx(np.sqrt((1 + 9 + 4 + 16) / 4))
    # SC: (scaled errors)^2 summed over frames and columns, divided by the number of columns
    assert out["SC"] == pytest.approx(((2 * 1) ** 2 + (2 * 3) ** 2 + (0.5 * 2) ** 2 + (0.5 * 4) ** 2) / 2)
    # predictions of just the missing frames give the same
    assert P.errors(Y_true, Y_pred[start:], cols, scale, start=start) == out
    with pytest.raises(ValueError, match="shape"):
        P.errors(Y_true, Y_pred[1:], cols, scale, start=start)
    Y_pred[start, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        P.errors(Y_true, Y_pred, cols, scale, start=start)


def test_frame_index_restarts_per_sequence():
    assert P.frame_index(np.array([0, 0, 0, 1, 1, 2])).tolist() == [0, 1, 2, 0, 1, 0]


# ------------------------------------------------------------------ nearest neighbour
def _brute_nn(A, B, observed, standardise):
    A, B = A[:, observed], B[:, observed]
    if standardise:
        sd = A.std(axis=0, ddof=1)
        A, B = A / sd, B / sd
    out = []
    for b in B:
        dists = [float(np.sum((a - b) ** 2)) for a in A]
        out.append(int(np.argmin(dists)))
    return np.array(out)


@pytest.mark.parametrize("standardise", [False, True])
def test_nearest_rows_equal_brute_force(standardise):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((40, 6)) * np.array([1, 10, 0.1, 3, 1, 100])
    B = rng.standard_normal((12, 6)) * np.array([1, 10, 0.1, 3, 1, 100])
    observed = np.array([0, 2, 3, 5])
    got = P.nearest_rows(A, B, observed, standardise)
    assert np.array_equal(got, _brute_nn(A, B, observed, standardise))


def test_standardising_changes_the_neighbour():
    # column 1 has a huge spread in training: it dominates raw distances only
    A = np.array([[0.0, 0.0], [1.0, 100.0], [0.1, 300.0]])
    b = np.array([[0.95, 250.0]])
    assert P.nearest_rows(A, b, np.array([0, 1]), False)[0] == 2
    assert P.nearest_rows(A, b, np.array([0, 1]), True)[0] == 1


def test_nn_reconstruct_fills_only_missing_entries():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((30, 5))
    Y_star = rng.standard_normal((4, 5))
    Y_star[0, [1, 2]] = np.nan
    Y_star[1, [1, 2]] = np.nan
    Y_star[2, 4] = np.nan
    out = P.nn_reconstruct(Y, Y_star, standardise=False)
    obs = ~np.isnan(Y_star)
    assert np.array_equal(out[obs], Y_star[obs]) and not np.isnan(out).any()
    for i in range(3):
        miss = np.isnan(Y_star[i])
        j = _brute_nn(Y, Y_star[i:i + 1], np.flatnonzero(~miss), False)[0]
        assert np.array_equal(out[i, miss], Y[j, miss])
    Y_star[3] = np.nan
    with pytest.raises(ValueError, match="row 3"):
        P.nn_reconstruct(Y, Y_star, standardise=True)


def test_experiments_are_registered():
    for name in ("cmu35", "cmu35-static"):
        assert name in EXPERIMENTS


# ------------------------------------------------------------------ real data
MIRROR = find_mirror("cmu_mocap_35/cmu35TaylorScaleBias.mat")


@pytest.mark.slow
@pytest.mark.skipif(MIRROR is None, reason="CMU 35 files (the offline mirror ../shared/datasets) not found")
def test_baselines_reproduce_the_paper(tmp_path):
    data = P.load_data(mirror=MIRROR, cache_dir=tmp_path / "cache")
    assert data.Y.shape == (2613, 59) and data.Y_test.shape == (124, 59)
    assert len(np.unique(data.sequence)) == 31 and data.t[:3].tolist() == [0, 1, 2]
    report = P.validate_baselines(data, rtol=0.003)  # raises if a figure is off
    ours = {k: [round(o, 2) for o, _, _ in v] for k, v in report.items()}
    assert ours["NN (angle space)"] == [14.01, 4.11, 30.89, 3.2]
    assert ours["NN sc. (scaled space)"] == [13.5, 4.44, 20.86, 2.62]


@pytest.mark.slow
@pytest.mark.skipif(MIRROR is None, reason="CMU 35 files (the offline mirror ../shared/datasets) not found")
def test_report_of_the_baseline_rows(tmp_path):
    """The table, JSON and figure of the experiment, from the rows that need no model."""
    import json

    from bgplvm.reproduce.cmu35 import Row, make_result, nn_rows
    from bgplvm.reproduce.report import Context

    data = P.load_data(mirror=MIRROR, cache_dir=tmp_path / "cache")
    rows = nn_rows(data) + [Row("VGP-LVM (static)", skipped="not on this branch"),
                            Row("Dyn. VGP-LVM (Exp. Quadr.), state space", skipped="not on this branch")]
    ctx = Context(out_dir=tmp_path / "out", verbose=False)
    res = make_result("cmu35", "CMU", rows, data, ctx)
    res.write(tmp_path / "out" / "cmu35")
    md = (tmp_path / "out" / "cmu35" / "table.md").read_text()
    assert "| NN (angle space) | 14.01 | 14.0 | 4.11 | 4.11 | 30.89 | 30.9 | 3.20 | 3.20 |" in md
    assert "VGP-LVM (static) (not run)" in md and "not on this branch" in md
    # a state-space row stands beside the paper's figures of its dense row
    assert "| Dyn. VGP-LVM (Exp. Quadr.), state space (not run) | - | 7.76 | - | 3.28 |" in md
    js = json.loads((tmp_path / "out" / "cmu35" / "result.json").read_text())
    assert js["numbers"]["NN sc. (scaled space)"]["results"]["body"]["SC"] == pytest.approx(20.8556, abs=1e-3)
    png = tmp_path / "out" / "cmu35" / "cmu35_reconstruction.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_require_names_what_is_missing():
    from bgplvm.reproduce.models import ApiMissing, require

    assert require("BayesianGPLVM", "fit", issue=9).__name__ == "BayesianGPLVM"
    with pytest.raises(ApiMissing, match=r"bgplvm.NoSuchModel is not on this branch yet \(issue 8\)"):
        require("NoSuchModel", "fit", issue=8)
    with pytest.raises(ApiMissing, match=r"bgplvm.BayesianGPLVM.no_such_method"):
        require("BayesianGPLVM", "fit", "no_such_method", issue=9)
    with pytest.raises(ApiMissing, match="bgplvm.no_such_module, which bgplvm.BayesianGPLVM.fit uses"):
        require("BayesianGPLVM", "fit", issue=9, modules=("bgplvm.no_such_module",))


def test_seed_table_spread_and_nn_count():
    from bgplvm.reproduce import cmu35 as C

    nn = [C.Row("NN (angle space)", results={"legs": {"SC": 14.0, "RA": 4.1}, "body": {"SC": 30.9, "RA": 3.2}}),
          C.Row("NN sc. (scaled space)", results={"legs": {"SC": 13.5, "RA": 4.4}, "body": {"SC": 20.8, "RA": 2.45}})]

    def row(name, lsc, lra, bsc, bra, bound):
        return C.Row(name, results={"legs": {"SC": lsc, "RA": lra}, "body": {"SC": bsc, "RA": bra}},
                     info={"bound": bound, "ard_kept": 3})

    dyn, static = "Dyn. VGP-LVM (Matern 3/2)", "VGP-LVM (static)"
    runs = {0: [row(dyn, 13.0, 4.0, 15.0, 2.5, 1.0), row(static, 15.0, 4.5, 18.0, 2.6, 0.5)],
            1: [row(dyn, 15.0, 4.6, 14.0, 2.4, 2.0), row(static, 14.0, 4.4, 17.0, 2.7, 0.6)],
            2: [row(dyn, 11.0, 3.8, 13.0, 2.3, 3.0), C.Row(static, skipped="not run")]}
    t, numbers = C.seed_table(runs, nn)
    cells = {r[0]: r for r in t.rows}
    assert [r[0] for r in t.rows] == [dyn, static]  # the report's row order, skipped runs left out
    assert cells[dyn][1] == 3 and cells[static][1] == 2
    assert cells[dyn][2] == "13.00 (11.00-15.00)"
    assert cells[dyn][5] == "2.40 (2.30-2.50)"
    # the bar is the better NN row in each column: 13.5 / 4.1 / 20.8 / 2.45; seed 0 beats the
    # angle-space row everywhere but not the scaled row's B RA, seed 1 loses on legs
    assert cells[dyn][6] == "1 of 3"
    assert cells[static][6] == "0 of 2"
    runs[0][0] = row(dyn, 13.0, 4.0, 15.0, 2.4, 1.0)
    t, _ = C.seed_table(runs, nn)
    assert {r[0]: r for r in t.rows}[dyn][6] == "2 of 3"
    assert numbers[dyn]["1"] == {"columns": [15.0, 4.6, 14.0, 2.4], "bound": 2.0, "ard_kept": 3, "fit_s": None}
    assert "L SC / L RA / B SC / B RA" in t.note and "NN sc. (scaled space): 13.50" in t.note
    # the state-space twin of a dynamical row: after its dense row, beside the paper's figures
    from bgplvm.reproduce.forms import base_name, row_name

    twin = row_name(dyn, "state_space")
    assert twin == dyn + ", state space" and base_name(twin) == dyn and row_name(dyn, "dense") == dyn
    runs[1].append(row(twin, 15.0, 4.6, 14.0, 2.4, 2.0))
    t, _ = C.seed_table(runs, nn)
    assert [r[0] for r in t.rows] == [dyn, twin, static]
    assert t.rows[1][1] == 1 and t.rows[1][-1] == "6.84 / 2.94 / 13.93 / 2.24"
