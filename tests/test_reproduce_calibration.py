"""``bgplvm reproduce calibration`` (issue 44): its sections score held-out truth per
prediction path beside the baselines, and a calibrated path moves toward its level."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm.reproduce import EXPERIMENTS, Context
from bgplvm.reproduce import calibration as rc
from mirror import needs_data


def _ctx(tmp_path):
    return Context(out_dir=tmp_path, quick=True, verbose=False)


@pytest.mark.slow
@needs_data("oil")
def test_oil_section_scores_as_fitted_calibrated_and_knn(tmp_path):
    assert "calibration" in EXPERIMENTS
    S, info = rc.Scored(_ctx(tmp_path)), {}
    rc.oil(_ctx(tmp_path), S, info)
    rows = {(r[0], r[2]): r for r in S.rows}
    test = "reconstruct"
    fitted, calibrated, knn = rows[(test, "as fitted")], rows[(test, "calibrated")], rows[(test, "k-NN baseline")]
    assert fitted[3] == calibrated[3] == knn[3] == 6000  # the 6 missing readings of 1000 test rows
    assert abs(calibrated[7] - 95) < abs(fitted[7] - 95) and abs(calibrated[7] - 95) <= 2
    assert calibrated[10] == fitted[10]  # the calibration leaves the means alone (RMSE)
    assert info["oil"]["n_entries"] == 6000 and len(info["oil"]["scale"]) == 12


def test_regression_sections_and_the_figure(tmp_path):
    S, info = rc.Scored(_ctx(tmp_path)), {}
    rc.uncertain_regression(_ctx(tmp_path), S, info)
    assert len(info["Sigma_z"]) == len(info["far_rows"]) == 1 and 0 < info["Sigma_z"][0]  # quick: one draw
    assert set(info["coverage_95_by_draw"]) == {r[2] for r in S.rows}
    note = rc._uig_note(S.numbers, info)
    assert "Sigma_z at the truth they hold" in note and f"(the truth {rc.UIG_INPUT_SD ** 2:g})" in note
    rc.semi_supervised(_ctx(tmp_path), S)
    paths = {r[0] for r in S.rows}
    assert paths == {"UncertainInputGPR.predict", "SemiSupervisedGPR.predict"}
    assert sum("baseline" in r[2] for r in S.rows) == 2 and sum("plain GP" in r[2] for r in S.rows) == 2
    assert [r[2] for r in S.rows].count("calibrated (m.calibrate(), held-out rows)") == 1
    for r in S.rows:
        cover = np.array(r[4:9], dtype=float)
        assert np.all(np.diff(cover) >= 0) and 0 <= cover.min() and cover.max() <= 100  # nested intervals
        lo, hi = (float(v) for v in r[11].split("-"))  # the 95 % coverage's bootstrap interval holds it
        assert lo <= r[7] <= hi and hi - lo > 0
        assert S.numbers[" | ".join(r[:3])]["coverage_95_ci"] == pytest.approx([lo / 100, hi / 100], abs=1e-3)
    rc.figure(tmp_path / "coverage.png", S.rows, S.numbers)
    assert (tmp_path / "coverage.png").stat().st_size > 5000


def test_mackey_glass_section_scores_the_defaults_calibrated_and_a_longer_series(tmp_path):
    S, info = rc.Scored(_ctx(tmp_path)), {}
    rc.mackey_glass(_ctx(tmp_path), S, info)
    hows = {(r[1].split(",")[0], r[2]) for r in S.rows}
    for delay in ("Mackey-Glass delay 17", "Mackey-Glass delay 30"):
        assert (delay, "calibrated (m.calibrate(), by horizon)") in hows
    long = [r for r in S.rows if f"{rc.MG_LONG} training steps" in r[1]]
    assert len(long) == 6 and {r[2] for r in long} == {"defaults (signal variance tied, sampled trajectories)",
                                                      "calibrated (m.calibrate(), by horizon)", rc.MG_HELD_NOISE}
    held = [v for k, v in info.items() if k.endswith(rc.MG_HELD_NOISE)]
    assert len(held) == 4 and all(v["noise_variance"] > 0 for v in held)
    cal = info[f"Mackey-Glass delay 30, {rc.MG_LONG} training steps, 100 ahead from 2 origins | calibration"]
    assert cal["horizon"] == 10 and len(cal["scale"]) == 10
    note = rc._mg_note(S.numbers, info)
    assert note.count("calibrated ") >= 4 and " - " not in note.split("as fitted")[1]
    assert note.count("; noise held at") == 4 and "RMSE" in note
    scored = [v for k, v in info.items() if not k.endswith("| calibration")]
    assert all(v["origins_warned"] in (0, 1, 2) and v["range_variance_over_series_var"] > 1 for v in scored)
    paper = info["Mackey-Glass delay 30, 100 steps ahead from 2 origins | paper's choices (signal variance learned, "
                 "Gaussian moments)"]
    assert paper["origins_warned"] == 2 and paper["max_var_over_series_var"] > paper["range_variance_over_series_var"]


def test_the_band_note_says_which_final_rows_miss_and_whether_their_interval_reaches_the_band():
    """Per path and data the calibrated row counts, else the defaults'; in-sample rows do not."""
    row = ["reconstruct", "trial", "calibrated", 434, 0, 0, 0, 89.4, 0, 0, 0, "85.0-94.0"]
    wide = ["forecast", "delay 17", "defaults (sampled)", 2000, 0, 0, 0, 98.7, 0, 0, 0, "98.0-99.5"]
    fitted = ["reconstruct", "trial", "as fitted", 434, 0, 0, 0, 70.0, 0, 0, 0, "60.0-80.0"]
    calibrated_too = ["forecast", "delay 30", "calibrated (by horizon)", 2000, 0, 0, 0, 96.0, 0, 0, 0, "94.0-97.5"]
    uncalibrated = ["forecast", "delay 30", "defaults (sampled)", 2000, 0, 0, 0, 90.0, 0, 0, 0, "88.0-92.0"]
    in_sample = ["predict", "training rows (in-sample)", "calibrated", 1000, 0, 0, 0, 100.0, 0, 0, 0, "100.0-100.0"]
    note = rc._band_note([row, wide, fitted, uncalibrated, calibrated_too, in_sample])
    assert note.startswith("**Outside 93-97 %**: 2 of the 3 final rows on held-out data")
    assert "reach the band for reconstruct, trial, calibrated: 89.4 % (85.0-94.0); they lie outside it for " \
           "forecast, delay 17, defaults: 98.7 % (98.0-99.5)." in note
    assert rc._band_note([row, fitted]).endswith("reach the band for reconstruct, trial, calibrated: 89.4 % (85.0-94.0).")
    assert rc._band_note([fitted, in_sample]) == ""
    assert rc._band_note([row[:7] + [95.0] + row[8:]]).startswith("Every one of the 1 final rows")
