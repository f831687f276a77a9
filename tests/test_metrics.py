"""bgplvm.metrics: coverage, NLPD, CRPS and PIT of Gaussian predictions, against their
definitions (scipy's densities, numerical integrals) and on draws from the predictions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from bgplvm.metrics import LEVELS, gaussian_scores, interval_z, table


def test_a_calibrated_forecast_covers_its_levels_and_has_a_flat_pit():
    rng = np.random.default_rng(0)
    n = 200_000
    m = rng.normal(size=n)
    v = rng.uniform(0.1, 3.0, size=n)
    y = m + np.sqrt(v) * rng.standard_normal(n)
    s = gaussian_scores(m, v, y)
    for p in LEVELS:  # binomial sd at n = 2e5 is < 1.2e-3
        assert abs(s.coverage[p] - p) < 5e-3, (p, s.coverage[p])
    assert np.all(np.abs(s.pit - 0.1) < 5e-3) and abs(s.pit.sum() - 1) < 1e-12
    assert s.n == n


def test_too_narrow_intervals_undercover_with_a_u_shaped_pit():
    rng = np.random.default_rng(1)
    y = rng.standard_normal(50_000)
    s = gaussian_scores(np.zeros_like(y), np.full_like(y, 0.25), y)  # sd 0.5 for truth sd 1
    assert abs(s.coverage[0.95] - (2 * stats.norm.cdf(0.98) - 1)) < 1e-2
    assert s.pit[0] > 0.2 and s.pit[-1] > 0.2 and s.pit[4] < 0.06


def test_nlpd_and_crps_equal_their_definitions():
    rng = np.random.default_rng(2)
    m, v, y = rng.normal(size=7), rng.uniform(0.05, 2, size=7), rng.normal(size=7)
    s = gaussian_scores(m, v, y)
    assert np.isclose(s.nlpd, -np.mean(stats.norm.logpdf(y, m, np.sqrt(v))), rtol=1e-13)
    # CRPS = int (F(x) - 1{x >= y})^2 dx, by quadrature
    crps = []
    for mi, vi, yi in zip(m, v, y):
        F = lambda x: stats.norm.cdf(x, mi, np.sqrt(vi))  # noqa: E731
        lo, hi = mi - 12 * np.sqrt(vi), mi + 12 * np.sqrt(vi)
        a = integrate.quad(lambda x: F(x) ** 2, min(lo, yi), yi, epsabs=1e-12)[0]
        b = integrate.quad(lambda x: (1 - F(x)) ** 2, yi, max(hi, yi), epsabs=1e-12)[0]
        crps.append(a + b)
    assert np.isclose(s.crps, np.mean(crps), rtol=1e-8)
    assert np.isclose(s.rmse, np.sqrt(np.mean((y - m) ** 2)))


def test_crps_tends_to_the_absolute_error_as_the_variance_vanishes():
    y, m = np.array([1.0, -2.0, 0.5]), np.array([0.0, 0.0, 0.4])
    s = gaussian_scores(m, np.full(3, 1e-14), y)
    assert np.isclose(s.crps, np.mean(np.abs(y - m)), rtol=1e-6)


def test_missing_truth_and_masks_are_left_out():
    y = np.array([[1.0, np.nan], [0.0, 2.0]])
    m, v = np.zeros((2, 2)), np.ones((2, 2))
    assert gaussian_scores(m, v, y).n == 3
    s = gaussian_scores(m, v, y, mask=np.array([[True, True], [False, True]]))
    assert s.n == 2 and np.isclose(s.rmse, np.sqrt((1 + 4) / 2))


def test_bad_input_is_refused_saying_what_to_do():
    with pytest.raises(ValueError, match="one shape"):
        gaussian_scores(np.zeros(3), np.ones(2), np.zeros(3))
    with pytest.raises(ValueError, match="include the noise variance"):
        gaussian_scores(np.zeros(3), np.array([1.0, 0.0, 1.0]), np.zeros(3))
    with pytest.raises(ValueError, match="nothing to score"):
        gaussian_scores(np.zeros(2), np.ones(2), np.full(2, np.nan))
    with pytest.raises(ValueError, match="finite"):
        gaussian_scores(np.array([np.inf, 0]), np.ones(2), np.zeros(2))
    with pytest.raises(ValueError, match="level"):
        interval_z(1.0)
    assert np.isclose(interval_z(0.95), 1.959963984540054)


def test_scores_print_as_a_table_and_as_json_numbers():
    rng = np.random.default_rng(3)
    y = rng.standard_normal(1000)
    s = gaussian_scores(np.zeros(1000), np.ones(1000), y)
    text = table({"a path": s})
    assert text.splitlines()[0].startswith("| path | n | 50 % | 80 % | 90 % | 95 % | 99 % | NLPD")
    assert "| a path | 1000 |" in text
    d = s.as_dict()
    assert set(d["coverage"]) == {"0.5", "0.8", "0.9", "0.95", "0.99"} and len(d["pit"]) == 10


def test_the_coverage_interval_holds_the_level_and_widens_with_correlated_rows():
    """Independent rows: the 90 % bootstrap interval of the 95 % coverage holds the truth
    (0.95) about 90 % of the time and is about as wide as the binomial's. Rows of one
    correlated error (an AR(1) with coefficient 0.9, as neighbouring frames' errors are) give
    a wider interval with blocks (here 1.9x) than when the rows are taken as independent."""
    from bgplvm.metrics import coverage_interval

    rng = np.random.default_rng(0)
    n, held = 400, 0
    for seed in range(100):
        y = np.random.default_rng(seed).standard_normal((n, 3))
        lo, hi = coverage_interval(np.zeros_like(y), np.ones_like(y), y, block=1, n_boot=400, seed=seed)
        held += lo <= 0.95 <= hi
    assert 80 <= held <= 98
    binomial = 2 * 1.645 * np.sqrt(0.95 * 0.05 / (3 * n))
    assert 0.7 * binomial < hi - lo < 1.3 * binomial
    e = np.empty(n)
    e[0] = rng.standard_normal()
    for t in range(1, n):
        e[t] = 0.9 * e[t - 1] + np.sqrt(1 - 0.81) * rng.standard_normal()
    Y = e[:, None] + np.zeros((n, 3))
    lo1, hi1 = coverage_interval(np.zeros_like(Y), np.ones_like(Y), Y, block=1)
    lo_b, hi_b = coverage_interval(np.zeros_like(Y), np.ones_like(Y), Y, block=20)
    assert hi_b - lo_b > 1.5 * (hi1 - lo1)
    assert coverage_interval(np.zeros(50), np.ones(50), np.zeros(50)) == (1.0, 1.0)


def test_the_coverage_interval_refuses_what_it_cannot_resample():
    from bgplvm.metrics import coverage_interval

    y = np.zeros((10, 2))
    with pytest.raises(ValueError, match="block must be an integer from 1 to the number of rows 10"):
        coverage_interval(y, y + 1, y, block=11)
    with pytest.raises(ValueError, match="ci must be in"):
        coverage_interval(y, y + 1, y, ci=1.0)
    with pytest.raises(ValueError, match="n_boot must be a positive integer"):
        coverage_interval(y, y + 1, y, n_boot=0)
    with pytest.raises(ValueError, match="mask must have the truth's shape"):
        coverage_interval(y, y + 1, y, mask=np.ones(10, dtype=bool))
    with pytest.raises(ValueError, match="needs rows"):
        coverage_interval(0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="one shape"):
        coverage_interval(y, y[:5] + 1, y)
