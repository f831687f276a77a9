"""The reproductions' two forms of the dynamical prior (reproduce/forms.py): both fits from
one start, the form's description (exact, or the approximation's order and kernel error)
and the side-by-side table."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm.reproduce import forms


def _start(time_kernel):
    import bgplvm

    rng = np.random.default_rng(0)
    t = np.arange(30, dtype=float)
    Y = np.column_stack([np.sin(t / 4), np.cos(t / 5), np.sin(t / 7)]) + 0.05 * rng.standard_normal((30, 3))
    return bgplvm.DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=6, time_kernel=time_kernel,
                                 time_prior="dense")


def _fit(m, label):
    m.fit(max_iters=15, progress=False)
    return {"fit_s": 0.5, "iterations": m.fit_info["iterations"], "evaluations": m.fit_info["evaluations"],
            "bound": m.fit_info["bound"]}


def test_exact_form_fits_from_the_same_start_to_the_same_bound():
    start = _start("matern32+white")
    x0 = start._x.copy()
    fits = forms.fit_in_forms(start, _fit, "m")
    assert list(fits) == ["dense", "state_space"]
    assert np.array_equal(start._x, x0)  # the start is not fitted itself
    (d_model, d), (s_model, s) = fits["dense"], fits["state_space"]
    assert d_model.time_prior == "dense" and s_model.time_prior == "state_space"
    assert d["start_bound"] == pytest.approx(s["start_bound"], rel=1e-10)
    assert s["bound"] == pytest.approx(d["bound"], rel=1e-6)
    assert s["state_space_exact"] and s["max_kernel_error"] == 0.0 and s["approximated_parts"] == {}
    assert s["vs_dense"]["bound"] == pytest.approx(s["bound"] - d["bound"])
    assert s["vs_dense"]["dense_form_minus_own"] == pytest.approx(0.0, abs=1e-9 * abs(d["bound"]))
    assert s["vs_dense"]["fit_s_ratio"] == 1.0
    assert forms.form_label(d) == "dense" and forms.form_label(s) == "state space (exact)"
    assert "exact" in s["time_prior_text"] and "dense" in d["time_prior_text"]


def test_rbf_form_says_its_taylor_order_and_kernel_error():
    from bgplvm.state_space import rbf_max_error

    fits = forms.fit_in_forms(_start("rbf+white"), _fit, "m")
    s = fits["state_space"][1]
    assert not s["state_space_exact"] and s["approximated_parts"] == {"rbf": 6}
    assert s["max_kernel_error"] == pytest.approx(rbf_max_error(6))  # variance 1 (frozen)
    label = forms.form_label(s)
    assert label == f"state space (rbf: Taylor order 6, max kernel error {rbf_max_error(6):.2g})"
    assert "order 6" in s["time_prior_text"]
    t = forms.forms_table([("rbf model", {f: i for f, (_, i) in fits.items()})])
    row = t.rows[0]
    assert row[0] == "rbf model" and row[1] == label and len(row) == len(t.columns)
    assert row[5] == f"{s['vs_dense']['bound']:+.3g}" and row[6] == f"{s['dense_form_bound'] - s['bound']:+.3g}"
    assert "same start" in t.note


def test_periodic_form_counts_its_harmonics():
    info = {"time_prior": "state_space", "state_space_exact": False, "max_kernel_error": 4.3e-3,
            "approximated_parts": {"rbf": 6, "periodic": 5}}
    assert forms.form_label(info) == ("state space (rbf: Taylor order 6, periodic: 5 harmonics, "
                                      "max kernel error 0.0043)")
