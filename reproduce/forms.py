"""The two forms of the dynamical prior p(X | t) in the reproductions: every dynamical row is
fitted twice from the same start (``DynamicalGPLVM.with_time_prior``: the same parameter
vector, q(X) and frozen set), in the paper's dense form (Kt factorised per sequence,
O(n^3)) and in the state-space form (Kalman filter / RTS smoother, O(n)), exact for Matern,
white and bias parts, an approximation for rbf (Taylor series) and periodic (harmonics).
The state-space row is the dense row's name + ``STATE_SPACE_ROW``; ``forms_table`` sets the
two fits side by side: bounds, their difference, wall times.
"""

from __future__ import annotations

from typing import Callable

from .report import Table

#: the forms every dynamical row is fitted in, dense first (the paper's rows)
TIME_PRIOR_FORMS = ("dense", "state_space")
STATE_SPACE_ROW = ", state space"


def row_name(name: str, form: str) -> str:
    """The row of model ``name`` fitted in ``form``: the dense form keeps the paper's name."""
    return name if form == "dense" else name + STATE_SPACE_ROW


def base_name(row: str) -> str:
    """The paper's row of a (possibly state-space) row name."""
    return row.removesuffix(STATE_SPACE_ROW)


def time_prior_info(m) -> dict:
    """How ``m``'s p(X | t) is computed, at its current parameters: the form,
    ``bgplvm.io.time_prior_text``, and for the state-space form whether it is exact, its
    state dimension, the approximation of each approximate part (rbf: Taylor order,
    periodic: number of harmonics; ``bgplvm.state_space.state_space(part).order``) and the
    kernel's max error sup_r |k_ss(r) - k(r)| (absolute, the parts' summed)."""
    from bgplvm.io import time_prior_text
    from bgplvm.state_space import state_space

    info = {"time_prior": m.time_prior, "time_prior_text": time_prior_text(m.prior)}
    if m.time_prior == "state_space":
        ss = m.prior.state_space()
        opts = m.prior.state_space_options
        info.update(state_space_exact=bool(ss.exact), state_dim=int(ss.H.shape[0]),
                    max_kernel_error=float(ss.max_error),
                    approximated_parts={p.name: state_space(p, **opts).order for p in m.prior.time_kernel.parts
                                        if p.name in ("rbf", "periodic")})
    return info


def form_label(info: dict) -> str:
    """A table cell: "dense", "state space (exact)" or "state space (rbf: Taylor order 6,
    max kernel error 4.3e-03)"."""
    if info.get("time_prior") != "state_space":
        return "dense"
    if info.get("state_space_exact"):
        return "state space (exact)"
    what = {"rbf": "rbf: Taylor order {}", "periodic": "periodic: {} harmonics"}
    parts = [what[k].format(v) for k, v in info["approximated_parts"].items()]
    return f"state space ({', '.join(parts)}, max kernel error {info['max_kernel_error']:.2g})"


def fit_in_forms(start, fit: Callable, label: str) -> dict[str, tuple]:
    """Fit the unfitted dynamical model ``start`` in every form of ``TIME_PRIOR_FORMS``
    from the same start; ``fit(m, label) -> info`` fits ``m`` and returns its facts
    (``fit_s``, ``iterations``, ``bound``, ...). Returns {form: (fitted model, info)}; the
    info adds ``start_bound``, why the fit ended (``fit_end``: max_iters, converged,
    stalled with ``fit_message``, ...), ``time_prior_info`` (at the fitted parameters: a periodic
    part's number of harmonics follows its lengthscale) and, for the state-space fit,
    ``dense_form_bound`` (the dense form's bound at its fitted parameters: the exact bound
    of an approximate fit) and ``vs_dense`` (differences to the dense fit, state space
    minus dense; the dense form's bound at the state-space fit minus its own; the ratio of
    fit times)."""
    out = {}
    for form in TIME_PRIOR_FORMS:
        m = start.with_time_prior(form)
        # the bound and its gradient at the start: also compiles (or loads) the form's kernels,
        # so that the fit's wall time is the fit's
        info = {"start_bound": float(m.elbo_and_gradient()[0])}
        info.update(fit(m, f"{label} [{form.replace('_', ' ')}]"))
        fi = getattr(m, "fit_info", {}) or {}
        info.update(fit_end=fi.get("reason"), **({"fit_message": fi["message"]} if "message" in fi else {}))
        info.update(time_prior_info(m))
        out[form] = (m, info)
    d, (m_ss, s) = out["dense"][1], out["state_space"]
    s["dense_form_bound"] = float(m_ss.with_time_prior("dense").elbo())
    s["vs_dense"] = {"start_bound": s["start_bound"] - d["start_bound"], "bound": s["bound"] - d["bound"],
                     "dense_form_bound": s["dense_form_bound"] - d["bound"],
                     "dense_form_minus_own": s["dense_form_bound"] - s["bound"],
                     "fit_s_ratio": s["fit_s"] / d["fit_s"]}
    return out


def _ms_per_eval(info: dict) -> str:
    n = info.get("evaluations") or info.get("iterations")
    return "-" if not n else f"{1000 * info['fit_s'] / n:.0f}"


def forms_table(pairs: list[tuple[str, dict]], title: str = "Dense vs state-space form of the time prior",
                note: str = "") -> Table:
    """One row per dynamical model: (label, {form: info}) from ``fit_in_forms``."""
    cols = ["model", "state-space form", "Δ start bound", "bound dense", "bound state space", "Δ bound",
            "dense form at the state-space fit − its bound", "fit s dense / state space (ratio)",
            "iterations (evaluations) dense / state space", "ms per evaluation dense / state space"]
    rows = []
    for label, infos in pairs:
        d, s = infos["dense"], infos["state_space"]
        v = s["vs_dense"]
        rows.append([label, form_label(s), f"{v['start_bound']:+.3g}", f"{d['bound']:,.2f}", f"{s['bound']:,.2f}",
                     f"{v['bound']:+.3g}", f"{v['dense_form_minus_own']:+.3g}",
                     f"{d['fit_s']:.1f} / {s['fit_s']:.1f} ({v['fit_s_ratio']:.2f})",
                     " / ".join(f"{i.get('iterations')} ({i.get('evaluations')})"
                                + ("" if i.get("fit_end") in (None, "max_iters") else f", {i['fit_end']}")
                                for i in (d, s)),
                     f"{_ms_per_eval(d)} / {_ms_per_eval(s)}"])
    base = ("Every dynamical model is fitted in both forms from the same start (DynamicalGPLVM."
            "with_time_prior: the same parameters, q(X) and frozen set). Δ: state space minus dense. "
            "Δ start bound: the two forms' bounds at the same parameters (rounding where the form is "
            "exact, the approximation's effect where not). Dense form at the state-space fit: the dense "
            "(exact) bound at the state-space fit's parameters minus the state-space bound there (the "
            "same check at the end point). "
            "Max kernel error: sup over r of |k_ss(r) - k(r)| at the fitted parameters (absolute). "
            "Wall times with one BLAS thread on a 2-CPU machine shared with other work.")
    return Table(title, cols, rows, base + (" " + note if note else ""))
