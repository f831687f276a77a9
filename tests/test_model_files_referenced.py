"""Model files that refer to their training rows instead of copying them (bgplvm.rowfile):
in process (``save(path, data=...)``) and from a model on Dask (``DistributedGPLVM.save``),
opened in process or on the workers again."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from bgplvm import BayesianGPLVM, DynamicalGPLVM
from bgplvm.io import ModelFileError


def _rows(N=240, D=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2))
    return np.sin(X @ rng.standard_normal((2, D))) + 0.05 * rng.standard_normal((N, D))


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".h5"])
def test_a_referenced_file_holds_no_copy_of_y_and_opens_to_the_same_model(tmp_path, suffix):
    Y = _rows()
    Y[3, 2] = np.nan  # a missing entry: the sampled rows compare NaN equal
    data = tmp_path / ("rows" + suffix)
    if suffix == ".npy":
        np.save(data, Y)
    elif suffix == ".npz":
        np.savez(data, Y=Y)
    else:
        import h5py

        with h5py.File(data, "w") as f:
            f["Y"] = Y
    m = BayesianGPLVM(Y, 2, 8)
    m.fit(max_iters=5)
    m.save(tmp_path / "ref.npz", data=data)
    m.save(tmp_path / "copy.npz")
    with np.load(tmp_path / "ref.npz") as z:
        assert "Y" not in z.files
    assert os.path.getsize(tmp_path / "ref.npz") < os.path.getsize(tmp_path / "copy.npz")
    m2 = BayesianGPLVM.load(tmp_path / "ref.npz")
    assert m2.data_file == str(data.resolve())
    assert m2.elbo() == m.elbo()
    np.testing.assert_array_equal(m2.Y, Y)
    assert f"referenced, not in the model file: {data.resolve()}" in m2.summary()
    assert BayesianGPLVM.load(tmp_path / "copy.npz").data_file is None
    # saved again, it refers to the same file (a large model does not grow a copy of Y)
    m2.save(tmp_path / "again.npz")
    with np.load(tmp_path / "again.npz") as z:
        assert "Y" not in z.files


def test_a_moved_folder_opens_and_missing_or_other_data_is_refused(tmp_path):
    Y = _rows()
    np.save(tmp_path / "rows.npy", Y)
    m = BayesianGPLVM(Y, 2, 8)
    m.save(tmp_path / "m.npz", data=tmp_path / "rows.npy")
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path, moved)  # model and rows moved together: found beside the model
    (tmp_path / "rows.npy").rename(tmp_path / "elsewhere.npy")
    assert BayesianGPLVM.load(moved / "m.npz").data_file == str((moved / "rows.npy").resolve())
    with pytest.raises(ModelFileError, match=r"referenced, not stored.*not at .*rows\.npy.*data=NEW_PATH"):
        BayesianGPLVM.load(tmp_path / "m.npz")
    assert BayesianGPLVM.load(tmp_path / "m.npz", data=tmp_path / "elsewhere.npy").elbo() == m.elbo()
    Y2 = Y.copy()
    Y2[0, 0] += 1.0
    np.save(tmp_path / "other.npy", Y2)
    with pytest.raises(ModelFileError, match="not its rows"):
        BayesianGPLVM.load(tmp_path / "m.npz", data=tmp_path / "other.npy")
    np.save(tmp_path / "short.npy", Y[:-1])
    with pytest.raises(ModelFileError, match=r"shape \(239, 6\).*\(240, 6\)"):
        BayesianGPLVM.load(tmp_path / "m.npz", data=tmp_path / "short.npy")
    with pytest.raises(ValueError, match="does not hold this model's training outputs"):
        m.save(tmp_path / "x.npz", data=tmp_path / "other.npy")
    assert not (tmp_path / "x.npz").exists()


# --- from a model on Dask -------------------------------------------------------------------
def test_a_distributed_model_saves_its_rows_referenced_and_opens_in_process_or_on_dask(client, tmp_path):
    from bgplvm.distributed import open_rows

    Y = _rows(300)
    np.save(tmp_path / "rows.npy", Y)
    with BayesianGPLVM(open_rows(tmp_path / "rows.npy"), 2, 10, client=client, chunks=3) as dm:
        dm.fit(max_iters=8)
        F = dm.elbo()
        mu = dm.latent_mean.compute()
        dm.save(tmp_path / "dm.npz")  # the file it was opened from is known: no data= needed
    with np.load(tmp_path / "dm.npz") as z:
        assert "Y" not in z.files
    m = BayesianGPLVM.load(tmp_path / "dm.npz")
    assert type(m) is BayesianGPLVM and m.data_file == str((tmp_path / "rows.npy").resolve())
    assert abs(m.elbo() - F) <= 1e-9 * abs(F)
    np.testing.assert_allclose(m.latent_mean, mu, rtol=0, atol=1e-12)
    with BayesianGPLVM.load(tmp_path / "dm.npz", client=client, chunks=2) as dm2:
        assert type(dm2).__name__ == "DistributedGPLVM" and len(dm2._blocks) == 2
        assert abs(dm2.elbo() - F) <= 1e-9 * abs(F)
    # rows given as an array: there is no file to refer to unless one is named (and checked)
    with BayesianGPLVM(Y, 2, 10, client=client, chunks=2) as dm3:
        with pytest.raises(ValueError, match="no file to refer to"):
            dm3.save(tmp_path / "x.npz")
        Y2 = Y.copy()
        Y2[150, 1] += 1.0
        np.save(tmp_path / "other.npy", Y2)
        with pytest.raises(ValueError, match="does not hold this model's rows"):
            dm3.save(tmp_path / "x.npz", data=tmp_path / "other.npy")
        dm3.save(tmp_path / "dm3.npz", data=tmp_path / "rows.npy")
        assert abs(BayesianGPLVM.load(tmp_path / "dm3.npz").elbo() - dm3.elbo()) <= 1e-9 * abs(dm3.elbo())


def test_a_distributed_dynamical_model_round_trips_with_its_sequences(client, tmp_path):
    Y = _rows(300)
    t = np.tile(np.arange(75.0), 4)
    seq = np.repeat([3, 1, 2, 0], 75)  # ids not in order: blocks take them in order of appearance
    np.save(tmp_path / "rows.npy", Y)
    with DynamicalGPLVM(Y, t, sequences=seq, latent_dim=2, num_inducing=10, client=client) as dd:
        dd.fit(max_iters=4)
        F = dd.elbo()
        mu = dd.latent_mean.compute()
        dd.save(tmp_path / "dd.npz", data=tmp_path / "rows.npy")
    m = BayesianGPLVM.load(tmp_path / "dd.npz")
    assert type(m) is DynamicalGPLVM
    assert abs(m.elbo() - F) <= 1e-9 * abs(F)
    np.testing.assert_allclose(m.latent_mean, mu, rtol=0, atol=1e-9)
    with DynamicalGPLVM.load(tmp_path / "dd.npz", client=client) as dd2:
        assert type(dd2).__name__ == "DistributedDynamicalGPLVM"
        assert abs(dd2.elbo() - F) <= 1e-9 * abs(F)
