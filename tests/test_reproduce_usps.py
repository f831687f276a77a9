"""``bgplvm reproduce usps``: the paper's pixels (GPmat's blurred digits) and a smoke run."""

import numpy as np
import pytest

from bgplvm.reproduce import Context, run
from bgplvm.reproduce import usps
from mirror import find_mirror


def test_gpmat_pixels_blur_and_round_to_sixteenths():
    """One ink pixel in the middle spreads over its 3x3 neighbours with the binomial
    weights (x 15/16, on a background of -15/16), on GPmat's grid of 1/16 levels."""
    Y = np.zeros((1, 256))
    Y[0, 8 * 16 + 8] = 1.0
    out = usps.gpmat_pixels(Y).reshape(16, 16)
    np.testing.assert_allclose(out * 16, np.round(out * 16), atol=1e-12)
    background = -15 / 16
    assert np.all(out[:7] == background) and np.all(out[10:] == background)
    rise = 2.0 * 15 / 16  # the pixel goes from -1 to 1
    for (dy, dx), w in {(0, 0): 4 / 16, (0, 1): 2 / 16, (1, 1): 1 / 16}.items():
        assert out[8 + dy, 8 + dx] == pytest.approx(np.round(16 * (background + w * rise)) / 16)


def test_gpmat_pixels_match_the_papers_test_file():
    """Against GPmat's own test file (the paper's, same digits in the same order): most
    pixels equal, the rest within rounding (the ESL source is not GPmat's exact input)."""
    mirror = find_mirror("usps/gpmat/usps_test.mat")
    if mirror is None or find_mirror("usps/usps.h5") is None:
        pytest.skip("USPS and GPmat's usps_test.mat not in the offline mirror")
    from bgplvm.datasets import load

    te = load("usps", split="test", mirror=str(mirror), progress=False)
    agree = usps.gpmat_agreement(te.Y, str(mirror))
    assert agree["exact"] > 0.85 and agree["rmse"] < 0.025


@pytest.mark.slow
def test_quick_run_writes_both_pixel_versions(tmp_path):
    mirror = find_mirror("usps/usps.h5")
    if mirror is None:
        pytest.skip("USPS not in the offline mirror")
    res = run("usps", Context(out_dir=tmp_path, quick=True, verbose=False, mirror=str(mirror)))
    runs = res.numbers["runs"]
    assert set(runs) == {"gpmat", "raw"}
    # 300 test digits: one class for all makes 244-282 errors, guessing ~270; the quick run's
    # ten small models (60 rows each, 150 iterations) made 44-46 and 1-NN 22-30 (2026-11-25)
    for r in runs.values():
        assert 0 <= r["errors"] < 75 and 0 <= r["nn_errors"] < 60
    assert (tmp_path / "usps" / "table.md").is_file()
