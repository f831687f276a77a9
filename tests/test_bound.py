"""The collapsed bound (FdFinal) against a dense reference, and its gradients w.r.t. the
psi statistics, Kuu and beta by central differences."""

import numpy as np
import pytest

from bgplvm.bound import OutputStats, collapsed_bound, kuu_jitter


def _problem(N=7, M=4, D=3, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, M))
    Kuu = A @ A.T + M * np.eye(M)
    Psi1 = rng.standard_normal((N, M))
    B = rng.standard_normal((M, M + 2))
    Psi2 = Psi1.T @ Psi1 + B @ B.T  # PSD and >= Psi1^T Psi1, as a real Psi2
    psi0 = rng.uniform(1.0, 2.0, N)
    Y = rng.standard_normal((N, D))
    return Kuu, psi0, Psi1, Psi2, 2.5, Y


def dense_bound(Kuu, psi0, Psi1, Psi2, beta, Y):
    """FdFinal summed over j, written with dense inverses and determinants (reference)."""
    N, D = Y.shape
    K = Kuu + kuu_jitter(Kuu) * np.eye(len(Kuu))  # 1e-6 x max(1, mean diag)
    C = beta * Psi2 + K
    W = beta * np.eye(N) - beta**2 * Psi1 @ np.linalg.solve(C, Psi1.T)
    Fj = (-0.5 * N * np.log(2 * np.pi) + 0.5 * N * np.log(beta)
          + 0.5 * np.linalg.slogdet(K)[1] - 0.5 * np.linalg.slogdet(C)[1])
    return (D * Fj - 0.5 * np.sum(Y * (W @ Y)) - 0.5 * beta * D * psi0.sum()
            + 0.5 * beta * D * np.trace(np.linalg.solve(K, Psi2)))


@pytest.mark.parametrize("D", [3, 12])  # D > N exercises the Y Y^T factor
def test_bound_matches_dense_formula(D):
    Kuu, psi0, Psi1, Psi2, beta, Y = _problem(D=D)
    F = collapsed_bound(Kuu, psi0, Psi1, Psi2, beta, OutputStats.from_centred(Y), grad=False).F
    assert F == pytest.approx(dense_bound(Kuu, psi0, Psi1, Psi2, beta, Y), rel=1e-10)


def test_output_factor_reproduces_YYT():
    Y = np.random.default_rng(1).standard_normal((5, 40))
    st = OutputStats.from_centred(Y)
    assert st.Yf.shape[1] <= 5 and st.D == 40
    np.testing.assert_allclose(st.Yf @ st.Yf.T, Y @ Y.T, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("D", [3, 12])
def test_gradients_by_central_differences(D):
    Kuu, psi0, Psi1, Psi2, beta, Y = _problem(D=D)
    data = OutputStats.from_centred(Y)
    t = collapsed_bound(Kuu, psi0, Psi1, Psi2, beta, data)
    rng = np.random.default_rng(2)
    eps = 1e-6

    def F(**kw):
        args = dict(Kuu=Kuu, psi0=psi0, Psi1=Psi1, Psi2=Psi2, beta=beta)
        args.update(kw)
        return collapsed_bound(args["Kuu"], args["psi0"], args["Psi1"], args["Psi2"],
                               args["beta"], data, grad=False).F

    def sym(V):
        return V + V.T

    checks = {
        "psi0": (rng.standard_normal(psi0.shape), t.dL_dpsi0, False),
        "Psi1": (rng.standard_normal(Psi1.shape), t.dL_dPsi1, False),
        "Psi2": (sym(rng.standard_normal(Psi2.shape)), t.dL_dPsi2, True),
        "Kuu": (sym(rng.standard_normal(Kuu.shape)), t.dL_dKuu, True),
    }
    base = dict(psi0=psi0, Psi1=Psi1, Psi2=Psi2, Kuu=Kuu)
    for name, (V, grad, _) in checks.items():
        num = (F(**{name: base[name] + eps * V}) - F(**{name: base[name] - eps * V})) / (2 * eps)
        assert np.sum(grad * V) == pytest.approx(num, rel=1e-6, abs=1e-6), name
    num = (F(beta=beta + eps) - F(beta=beta - eps)) / (2 * eps)
    assert t.dL_dbeta == pytest.approx(num, rel=1e-6, abs=1e-6)


def test_psi_statistics_that_break_the_nystrom_inequality_are_refused():
    """sum(psi0) >= tr(Kuu^-1 Psi2) holds for any real psi statistics; inaccurate ones that
    break it (a lengthscale underflowed to 0) would make the bound huge and positive, so
    the evaluation fails like a Cholesky (FloatingPointError, which the fit rejects)."""
    Kuu, psi0, Psi1, Psi2, beta, Y = _problem()
    data = OutputStats.from_centred(Y - Y.mean(0))
    trA = np.trace(np.linalg.solve(Kuu + kuu_jitter(Kuu) * np.eye(len(Kuu)), Psi2))
    assert trA < psi0.sum()  # the fixture is a valid problem
    collapsed_bound(Kuu, psi0, Psi1, Psi2, beta, data, grad=False)
    with pytest.raises(FloatingPointError, match="psi statistics are inaccurate"):
        collapsed_bound(Kuu, psi0, Psi1, 3 * psi0.sum() / trA * Psi2, beta, data, grad=False)


def test_a_bound_above_its_ceiling_is_refused():
    """F_hat <= N D / 2 log(beta / 2 pi) holds for any real statistics (each output's term
    is a Gaussian log density with covariance >= the noise's, less traces); rounding that
    breaks it (an ill-conditioned B: a fit of 1e4 rows reported 1.2e6 against 5.6e5) makes
    the evaluation fail like a Cholesky, for complete data and with missing values."""
    from bgplvm.bound import DataSums, bound_from_sums
    from bgplvm.missing import GroupSums, grouped_bound_from_sums

    Kuu, psi0, Psi1, Psi2, beta, Y = _problem()
    Yc = Y - Y.mean(0)
    N, D = Yc.shape
    ok = DataSums(N=N, D=D, psi0_sum=float(psi0.sum()), E=Psi1.T @ Yc, Psi2=Psi2, trYYT=float(np.sum(Yc ** 2)))
    F = bound_from_sums(Kuu, ok, beta, grad=False).F
    assert F <= 0.5 * N * D * np.log(beta / (2 * np.pi))
    # E inconsistent with tr(YY^T): the data-fit term beta^2/2 |c|^2 beyond beta/2 tr(YY^T)
    bad = DataSums(N=N, D=D, psi0_sum=ok.psi0_sum, E=1e3 * ok.E, Psi2=Psi2, trYYT=ok.trYYT)
    with pytest.raises(FloatingPointError, match="exceeds its ceiling"):
        bound_from_sums(Kuu, bad, beta, grad=True)
    one = dict(psi0g=np.array([ok.psi0_sum]), Psi2g=Psi2[None], foff=np.array([0, D]), Ng=np.array([float(N)]),
               Dg=np.array([float(D)]), trYYT=np.array([ok.trYYT]))
    assert grouped_bound_from_sums(Kuu, GroupSums(E=ok.E, **one), beta, grad=False).F == pytest.approx(F, rel=1e-12)
    with pytest.raises(FloatingPointError, match="exceeds its ceiling"):
        grouped_bound_from_sums(Kuu, GroupSums(E=bad.E, **one), beta, grad=False)


def test_the_kuu_gradient_includes_the_jitter_that_scales_with_kuu(monkeypatch):
    """The jitter is 1e-6 x mean(diag Kuu) above a mean of 1 (``bound.kuu_jitter``), so
    dF/dKuu carries its share; with the jitter raised to 1e-2 a gradient without it would
    be off by ~1e-2 relative along a direction that moves the diagonal."""
    from bgplvm import bound

    monkeypatch.setattr(bound, "JITTER", 1e-2)
    Kuu, psi0, Psi1, Psi2, beta, Y = _problem()
    assert np.trace(Kuu) / len(Kuu) > 1.0
    data = OutputStats.from_centred(Y)
    t = collapsed_bound(Kuu, psi0, Psi1, Psi2, beta, data)
    V = np.eye(len(Kuu)) + 0.1 * np.random.default_rng(3).standard_normal(Kuu.shape)
    V = V + V.T
    eps = 1e-6
    F = lambda K: collapsed_bound(K, psi0, Psi1, Psi2, beta, data, grad=False).F  # noqa: E731
    num = (F(Kuu + eps * V) - F(Kuu - eps * V)) / (2 * eps)
    assert np.sum(t.dL_dKuu * V) == pytest.approx(num, rel=1e-7)
