"""Generic finite-difference gradient checks (reusable by every test module).

Conventions: ``f(x) -> float`` and ``f_and_grad(x) -> (float, grad)`` take a flat float64
array ``x``; ``grad`` may have any shape with x.size entries.
"""

from __future__ import annotations

import numpy as np


def numerical_gradient(f, x, eps: float = 1e-6) -> np.ndarray:
    """Central differences (f(x + eps e_i) - f(x - eps e_i)) / (2 eps), one entry at a time.

    ``eps`` is an absolute step. Error O(eps^2 f''') + O(|f| 1e-16 / eps).
    """
    x = np.array(x, dtype=np.float64, copy=True).ravel()
    g = np.empty_like(x)
    for i in range(x.size):
        xi = x[i]
        x[i] = xi + eps
        fp = float(f(x.copy()))
        x[i] = xi - eps
        fm = float(f(x.copy()))
        x[i] = xi
        g[i] = (fp - fm) / (2.0 * eps)
    return g


def complex_step_gradient(f, x, h: float = 1e-30) -> np.ndarray:
    """Im f(x + i h e_i) / h: exact to rounding, for ``f`` written with complex-safe
    operations (no abs, conj, comparisons or real-only functions)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    xc = x.astype(np.complex128)
    g = np.empty_like(x)
    for i in range(x.size):
        xc[i] = x[i] + 1j * h
        g[i] = np.imag(f(xc.copy())) / h
        xc[i] = x[i]
    return g


def directional_derivative(f, x, direction, eps: float = 1e-6) -> float:
    """Central difference of f along ``direction`` (unnormalised)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    d = np.asarray(direction, dtype=np.float64).ravel()
    return (float(f(x + eps * d)) - float(f(x - eps * d))) / (2.0 * eps)


def gradient_error_report(analytic, numeric, names=None, k: int = 5) -> str:
    """The k worst entries (absolute error) as text, for assertion messages."""
    a = np.asarray(analytic, dtype=np.float64).ravel()
    n = np.asarray(numeric, dtype=np.float64).ravel()
    err = np.abs(a - n)
    lines = []
    for i in np.argsort(-err)[:k]:
        label = names[i] if names is not None else str(i)
        lines.append(f"  [{label}] analytic={a[i]:.10g} numeric={n[i]:.10g} |diff|={err[i]:.3g}")
    return "\n".join(lines)


def assert_close_gradient(analytic, numeric, rtol: float = 1e-5, atol: float = 1e-8, names=None) -> None:
    """Assert |a - n| <= atol + rtol * max(|n|_inf, |a|_inf) entry-wise (scale-aware)."""
    a = np.asarray(analytic, dtype=np.float64).ravel()
    n = np.asarray(numeric, dtype=np.float64).ravel()
    assert a.shape == n.shape, f"shapes differ: {a.shape} vs {n.shape}"
    assert np.all(np.isfinite(a)), "analytic gradient has non-finite entries"
    scale = max(np.max(np.abs(n), initial=0.0), np.max(np.abs(a), initial=0.0))
    tol = atol + rtol * scale
    if not np.all(np.abs(a - n) <= tol):
        raise AssertionError(
            f"gradient mismatch (tol {tol:.3g} = atol {atol:g} + rtol {rtol:g} * scale {scale:.3g}):\n"
            + gradient_error_report(a, n, names))


def assert_gradient(f_and_grad, x, rtol: float = 1e-5, atol: float = 1e-8, eps: float = 1e-6,
                    names=None) -> tuple[np.ndarray, np.ndarray]:
    """Compare the analytic gradient of ``f_and_grad`` at ``x`` with central differences.

    Returns (analytic, numeric) flat arrays.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    _, g = f_and_grad(x.copy())
    g = np.asarray(g, dtype=np.float64).ravel()
    num = numerical_gradient(lambda y: f_and_grad(y)[0], x, eps=eps)
    assert_close_gradient(g, num, rtol=rtol, atol=atol, names=names)
    return g, num


def assert_directional(f_and_grad, x, rtol: float = 1e-5, atol: float = 1e-8, eps: float = 1e-6,
                       seed: int = 0, n_directions: int = 3) -> None:
    """Check g . d against a central difference along random directions d (cheap for big x)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    _, g = f_and_grad(x.copy())
    g = np.asarray(g, dtype=np.float64).ravel()
    rng = np.random.default_rng(seed)
    for _ in range(n_directions):
        d = rng.standard_normal(x.size)
        d /= np.linalg.norm(d)
        num = directional_derivative(lambda y: f_and_grad(y)[0], x, d, eps=eps)
        ana = float(g @ d)
        tol = atol + rtol * max(abs(num), abs(ana), np.linalg.norm(g))
        assert abs(ana - num) <= tol, f"directional derivative {ana!r} vs numeric {num!r} (tol {tol:.3g})"


def assert_model_block_gradients(m, rtol: float = 1e-5, eps: float = 1e-6, seed: int = 3) -> None:
    """A model's bound gradient (``m._bound(x) -> (F, g)`` over its full unconstrained vector)
    along a random direction inside each parameter block in turn, then along one random
    direction of the whole vector; the failing block is named."""
    x = m._x.copy()
    _, g = m._bound(x)
    rng = np.random.default_rng(seed)
    blocks = [(b.name, m._layout.slices[b.name]) for b in m._layout.blocks] + [("all", slice(0, x.size))]
    for name, sl in blocks:
        d = np.zeros_like(x)
        d[sl] = rng.standard_normal(sl.stop - sl.start)
        num = (m._bound(x + eps * d, grad=False)[0] - m._bound(x - eps * d, grad=False)[0]) / (2 * eps)
        ana = float(g @ d)
        tol = max(rtol * abs(num), 1e-6 * np.linalg.norm(g))  # as pytest.approx(num, rel, abs)
        assert abs(ana - num) <= tol, f"block {name}: analytic {ana!r} vs numeric {num!r}"
