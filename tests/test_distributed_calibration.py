"""Calibration on Dask: the distributed models keep the in-process contract (issue 46,
point 6): ``calibration`` (set from one learned in process), ``predict`` / ``reconstruct``
/ ``forecast`` with ``calibrated=`` scale exactly as in process, ``from_model`` /
``to_model`` / ``save`` / ``load`` keep it, and ``calibrate`` itself says what to do."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bgplvm import BayesianGPLVM, DynamicalGPLVM

#: the k-NN baseline did better on this small fit (``Calibration.baseline_warning``): not the point here
pytestmark = pytest.mark.filterwarnings("ignore:k-nearest neighbours")

pytest.importorskip("distributed", reason="needs dask[distributed] (the test extra installs it)")
da = pytest.importorskip("dask.array")

#: of the largest entry: predictions from the same statistics summed in another order
#: (seen: 1.3e-10 uncalibrated and calibrated alike, at 20 iterations; 1e-8 at 60, as Kuu's
#: condition number grows)
TIGHT = 1e-9


def _synthetic(N=300, D=12, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2))
    return np.sin(X @ rng.standard_normal((2, D))) + 0.05 * rng.standard_normal((N, D))


def _holes(Y, frac, seed):
    rng = np.random.default_rng(seed)
    Y = Y.copy()
    hole = rng.random(Y.shape) < frac
    hole[:, 0] = False  # no empty row
    Y[hole] = np.nan
    return Y


@pytest.fixture(scope="module")
def calibrated():
    """An in-process model fitted on 250 rows and calibrated (adaptive: a row factor), the
    50 rows after them with holes as new rows."""
    Y = _synthetic(N=300)
    m = BayesianGPLVM(Y[:250], 3, 12, seed=0)
    m.fit(20, progress=False)
    cal = m.calibrate(rows=120, hide=0.5, folds=3)
    assert cal.adaptive and cal.scale.shape == (12,) and not np.allclose(cal.scale, 1.0)
    return m, _holes(Y[250:], 0.4, seed=3)


def _equal(a, b) -> bool:
    """The same ``Calibration`` (its scales and its record)."""
    return np.array_equal(a.scale, b.scale) and a.meta() == b.meta()


def _same(got, ref):
    """(mean, var) pairs equal to ``TIGHT`` of their largest entry."""
    for g, r in zip(got, ref):
        np.testing.assert_allclose(np.asarray(g), r, rtol=0, atol=TIGHT * np.abs(r).max())


def test_a_calibrated_model_predicts_alike_on_dask(client, calibrated, tmp_path):
    """from_model carries the calibration; predict and reconstruct (NumPy rows, and a dask
    array mapped on the workers) with calibrated=True / False equal the in-process ones;
    to_model gives it back; save / load(client=) keeps it."""
    from bgplvm.distributed import DistributedGPLVM, open_rows

    m, new = calibrated
    X = np.random.default_rng(2).standard_normal((9, 3))
    S = np.full_like(X, 0.3)
    with DistributedGPLVM.from_model(m, client=client, chunks=2) as dm:
        assert dm.calibration is m.calibration
        for c in (True, False):
            _same(dm.predict(X, S, calibrated=c), m.predict(X, S, calibrated=c))
            _same(dm.predict(X, include_noise=False, calibrated=c), m.predict(X, include_noise=False, calibrated=c))
            # q(x*) at its start (max_iters=0, the same nearest training row): the row
            # factor of every new row from the same uncalibrated variances of all its entries
            ref = m.reconstruct(new, calibrated=c, max_iters=0)
            _same(dm.reconstruct(new, calibrated=c, max_iters=0), ref)
            _same([a.compute() for a in dm.reconstruct(da.from_array(new, chunks=(20, -1)), calibrated=c,
                                                       max_iters=0)], ref)
        on, off = m.reconstruct(new, max_iters=0)[1], m.reconstruct(new, calibrated=False, max_iters=0)[1]
        assert not np.allclose(on, off)  # the test sees the calibration
        # optimised q(x*): to the optimiser's tolerance, as uncalibrated (test_distributed)
        np.testing.assert_allclose(dm.reconstruct(new, max_iters=50)[1], m.reconstruct(new, max_iters=50)[1],
                                   rtol=1e-4, atol=1e-5)

        back = dm.to_model()
        assert type(back) is BayesianGPLVM and _equal(back.calibration, m.calibration)
        assert np.array_equal(back._x, m._x)
        _same(back.reconstruct(new, max_iters=0), m.reconstruct(new, max_iters=0))

        np.save(tmp_path / "rows.npy", m.Y)
        path = tmp_path / "m.npz"
        dm.save(path, data=tmp_path / "rows.npy")
    loaded = BayesianGPLVM.load(path)  # in process: the calibration is active at the saved parameters
    assert _equal(loaded.calibration, m.calibration)
    _same(loaded.predict(X, S), m.predict(X, S))
    with BayesianGPLVM.load(path, client=client, chunks=3) as dm2:
        assert _equal(dm2.calibration, m.calibration)  # checked against the rows the workers read
        _same(dm2.predict(X, S), m.predict(X, S))
        _same(dm2.reconstruct(new, max_iters=0), m.reconstruct(new, max_iters=0))
        dm2.calibration = None
        _same(dm2.predict(X, S), m.predict(X, S, calibrated=False))
    # a model file written in process (Y stored) opens on Dask with its calibration
    m.save(tmp_path / "inproc.npz")
    with BayesianGPLVM.load(tmp_path / "inproc.npz", client=client) as dm3:
        assert _equal(dm3.calibration, m.calibration)
        _same(dm3.predict(X), m.predict(X))
    with DistributedGPLVM(open_rows(tmp_path / "rows.npy"), 3, 12, client=client, chunks=2) as fresh:
        with pytest.warns(UserWarning, match="other parameters"):  # the same rows, other parameters
            fresh.calibration = m.calibration
            _, v = fresh.predict(X)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(v, fresh.predict(X, calibrated=False)[1])


def test_calibrate_on_dask_says_what_to_do(client, calibrated):
    """calibrate refuses on Dask and names the way that works: to_model(), calibrate it,
    assign it; a calibration of other rows is refused, the one of to_model() taken."""
    from bgplvm.distributed import DistributedGPLVM

    m, _ = calibrated
    with DistributedGPLVM.from_model(m, client=client, chunks=2) as dm:
        dm.calibration = None
        with pytest.raises(NotImplementedError, match=r"m = dm\.to_model\(\); dm\.calibration = m\.calibrate"):
            dm.calibrate(rows=100)
        sub = BayesianGPLVM(m.Y[:200], 3, 12, seed=0)
        sub._set_x(np.r_[m._x[:200 * 3], m._x[250 * 3:250 * 3 + 200 * 3], m._x[250 * 6:]])
        with pytest.raises(ValueError, match="other data"):
            dm.calibration = sub.calibrate(rows=80, hide=0.5, folds=2)
        local = dm.to_model()
        dm.calibration = local.calibrate(rows=120, hide=0.5, folds=3)
        assert _equal(dm.calibration, m.calibration)  # the same model, the same calibration
        X = np.random.default_rng(4).standard_normal((5, 3))
        _same(dm.predict(X), m.predict(X))


def _sequences(seed=0):
    rng = np.random.default_rng(seed)
    seqs = np.repeat(np.arange(4), [30, 40, 30, 40])
    t = np.concatenate([0.1 * np.arange(n) for n in (30, 40, 30, 40)])
    Y = np.sin(np.c_[t, 2 * t, 3 * t] @ rng.standard_normal((3, 8))) + 0.05 * rng.standard_normal((seqs.size, 8))
    return Y, t, seqs


def test_a_calibrated_dynamical_model_forecasts_and_reconstructs_alike_on_dask(client, monkeypatch):
    """DistributedDynamicalGPLVM: forecast / reconstruct (a new sequence, frames of a
    training one, reconstruct_sequences on the workers) with calibrated=True / False as
    DynamicalGPLVM's; from_model / to_model carry the calibration; calibrate refuses."""
    from bgplvm.distributed import DistributedDynamicalGPLVM

    Y, t, seqs = _sequences()
    m = DynamicalGPLVM(Y, t, 3, 10, sequences=seqs, time_kernel="matern32+white")
    m.fit(20, progress=False)
    cal = m.calibrate(rows=60, hide=0.4, folds=2, max_iters=10)
    assert cal.stretches and cal.adaptive
    ts = 0.1 * np.arange(12)
    Ys = _holes(np.sin(np.c_[ts, 2 * ts, 3 * ts] @ np.random.default_rng(7).standard_normal((3, 8))), 0.3, 8)
    t_after = 4.0 + 0.1 * np.arange(1, 6)
    with DistributedDynamicalGPLVM.from_model(m, client=client, chunks=2) as dm:
        assert dm.calibration is cal
        for c in (True, False):
            _same(dm.forecast(t_after, 1, calibrated=c), m.forecast(t_after, 1, calibrated=c))
            ref = m.reconstruct(Ys, ts, max_iters=0, calibrated=c)
            _same(dm.reconstruct(Ys, ts, max_iters=0, calibrated=c), ref)
            _same(dm.reconstruct_sequences([(Ys, ts)], max_iters=0, calibrated=c)[0], ref)
            _same(dm.reconstruct(Ys, ts, max_iters=0, condition=False, calibrated=c),
                  m.reconstruct(Ys, ts, max_iters=0, condition=False, calibrated=c))
            _same(dm.reconstruct(Ys[:5], t_after, sequence=1, max_iters=0, calibrated=c),
                  m.reconstruct(Ys[:5], t_after, sequence=1, max_iters=0, calibrated=c))
        assert not np.allclose(m.forecast(t_after, 1)[1], m.forecast(t_after, 1, calibrated=False)[1])
        with pytest.raises(NotImplementedError, match=r"DynamicalGPLVM\.calibrate"):
            dm.calibrate(path="forecast")
        # the record of Y a calibration is checked against, streamed from the workers a few
        # rows at a time, in Y's order (the blocks hold whole sequences, in another order)
        from bgplvm.distributed import persist

        monkeypatch.setattr(persist, "HASH_BYTES", 8 * Y.shape[1] * 7)
        dm._data_fp = None
        assert dm._data_record() == m._data_record()
        back = dm.to_model()
        assert type(back) is DynamicalGPLVM and _equal(back.calibration, cal)
        _same(back.forecast(t_after, 1), m.forecast(t_after, 1))


def test_impute_on_dask_is_the_in_process_models(client):
    """``impute`` has one contract: on Dask (static, and dynamical with its rows reordered by
    sequence) it fills the training rows' missing entries as the in-process model does,
    calibrated (the path="impute" calibration and each row's factor) and not."""
    from bgplvm import DynamicalGPLVM
    from bgplvm.distributed import DistributedDynamicalGPLVM, DistributedGPLVM

    Y = _holes(_synthetic(N=120), 0.2, seed=5)
    m = BayesianGPLVM(Y, 3, 10, seed=0).fit(20, progress=False)
    m.calibrate(rows=60, folds=3, path="impute")
    seq = np.repeat([1, 0, 2], 40)  # sequences out of Y's order
    d = DynamicalGPLVM(Y, np.tile(np.arange(40.0), 3), 2, 8, sequences=seq, seed=0).fit(10, progress=False)
    for model, cls in ((m, DistributedGPLVM), (d, DistributedDynamicalGPLVM)):
        with cls.from_model(model, client=client, chunks=3) as dm:
            for calibrated in (True, False):
                _same(dm.impute(calibrated=calibrated), model.impute(calibrated=calibrated))
    full = BayesianGPLVM(_synthetic(N=60), 2, 6, seed=0)
    with DistributedGPLVM.from_model(full, client=client, chunks=2) as dm:
        mean, var = dm.impute()
        np.testing.assert_array_equal(mean, full.Y) and np.testing.assert_array_equal(var, 0.0)


def test_summary_on_dask_reads_as_in_process(client):
    """``summary`` has one contract: a distributed model's (static with missing values and a
    calibration; dynamical with its time kernel and time prior) says what the in-process
    model's says, line for line, but its class name."""
    from bgplvm import DynamicalGPLVM
    from bgplvm.distributed import DistributedDynamicalGPLVM, DistributedGPLVM

    Y = _holes(_synthetic(N=90), 0.2, seed=7)
    m = BayesianGPLVM(Y, 3, 10, seed=0).fit(15, progress=False)
    m.calibrate(rows=60, folds=3)
    d = DynamicalGPLVM(Y, np.tile(np.arange(30.0), 3), 2, 8, sequences=np.repeat([0, 1, 2], 30),
                       seed=0).fit(8, progress=False)
    for model, cls in ((m, DistributedGPLVM), (d, DistributedDynamicalGPLVM)):
        with cls.from_model(model, client=client, chunks=3) as dm:
            dm.fit_info = dict(model.fit_info)
            got, want = dm.summary().splitlines(), model.summary().splitlines()
            assert got[0].split()[0] == cls.__name__
            assert [g.split(None, 1)[1] if i == 0 else g for i, g in enumerate(got)] == \
                   [w.split(None, 1)[1] if i == 0 else w for i, w in enumerate(want)]
    assert "missing values" in m.summary() and "time prior" in d.summary() and "intervals" in m.summary()
