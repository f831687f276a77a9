"""The `bgplvm` command line: fit on user data and on a named data set, then summary."""

import numpy as np
import pytest

from bgplvm import BayesianGPLVM
from bgplvm.cli import main


def test_fit_and_summary_on_user_data(tmp_path, capsys):
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 2 * np.pi, 40)
    Y = np.c_[np.cos(t), np.sin(t), np.cos(2 * t)] + 0.05 * rng.standard_normal((40, 3))
    np.save(tmp_path / "y.npy", Y)
    out = tmp_path / "m.npz"
    assert main(["fit", "--data", str(tmp_path / "y.npy"), "-q", "3", "-m", "8", "--iters", "30",
                 "--quiet", "--out", str(out)]) == 0
    m = BayesianGPLVM.load(out)
    assert m.Y.shape == (40, 3) and m.metadata["data_file"].endswith("y.npy")
    assert "intervals calibrated (" in capsys.readouterr().err and m.calibration is not None
    assert main(["summary", str(out)]) == 0
    text = capsys.readouterr().out
    assert "bound (ELBO)" in text and "ARD weights" in text and "switched on" in text
    assert f"{m.elbo():.4f}" in text and "intervals         calibrated (" in text
    assert main(["fit", "--data", str(tmp_path / "y.npy"), "-q", "3", "-m", "8", "--iters", "30",
                 "--quiet", "--no-calibrate", "--out", str(out)]) == 0
    assert BayesianGPLVM.load(out).calibration is None


def test_fit_reads_empty_csv_cells_and_nan_as_missing(tmp_path, capsys):
    rng = np.random.default_rng(1)
    t = rng.uniform(0, 2 * np.pi, 30)
    Y = np.c_[np.cos(t), np.sin(t), np.cos(2 * t)]
    lines = ["a,b,c"] + [",".join(f"{v:.6f}" for v in row) for row in Y]
    lines[3] = lines[3].split(",", 1)[0] + ",,0.5"  # an empty cell
    lines[7] = "nan," + lines[7].split(",", 1)[1]
    (tmp_path / "y.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "m.npz"
    assert main(["fit", "--data", str(tmp_path / "y.csv"), "-q", "2", "-m", "6", "--iters", "20",
                 "--quiet", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "2 of 90 entries are missing (2.2%)" in err
    m = BayesianGPLVM.load(out)
    assert np.isnan(m.Y[2, 1]) and np.isnan(m.Y[6, 0]) and m.Y_observed.sum() == 88
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    assert "missing values    2 of 90 entries (2.2%)" in capsys.readouterr().out
    (tmp_path / "inf.csv").write_text("1,2\n3,inf\n4,5\n")
    assert main(["fit", "--data", str(tmp_path / "inf.csv"), "--out", str(tmp_path / "o.npz")]) == 2
    assert "infinite (first at row 1, column 1)" in capsys.readouterr().err


def test_fit_on_embedded_dataset(tmp_path):
    out = tmp_path / "walk.npz"
    assert main(["fit", "--dataset", "synth_walk", "-q", "2", "-m", "10", "--iters", "10",
                 "--quiet", "--out", str(out)]) == 0
    assert BayesianGPLVM.load(out).metadata == {"dataset": "synth_walk"}


def test_errors_are_reported_not_raised(tmp_path, capsys):
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    assert main(["fit", "--data", str(tmp_path / "bad.npy"), "--out", str(tmp_path / "o.npz")]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["summary", str(tmp_path / "missing.npz")]) == 2
    assert main(["fit", "--dataset", "no_such_set", "--out", str(tmp_path / "o.npz")]) == 2
    assert "synth_walk" in capsys.readouterr().err  # the list of known names
    np.save(tmp_path / "plain.npy", np.zeros(3))
    assert main(["summary", str(tmp_path / "plain.npy")]) == 2
    assert "not a bgplvm model file" in capsys.readouterr().err


def test_unwritable_outputs_fail_before_the_work(tmp_path, capsys, monkeypatch):
    """--out naming a folder (fit) or a file (reproduce) fails at once, not after the fit."""
    from bgplvm import BayesianGPLVM as B

    monkeypatch.setattr(B, "fit", lambda *a, **k: pytest.fail("fitted before checking --out"))
    assert main(["fit", "--dataset", "synth_walk", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    import reproduce.cli

    monkeypatch.setattr(reproduce.cli, "run", lambda *a, **k: pytest.fail("ran before checking --out"))
    assert main(["reproduce", "walk", "--quick", "--out", str(tmp_path / "afile")]) == 2
    assert "not a writable folder" in capsys.readouterr().err


def test_commands_of_the_other_parts_are_found_through_entry_points(capsys):
    assert main(["datasets", "list"]) == 0
    assert "synth_walk" in capsys.readouterr().out
    assert main(["reproduce", "--list"]) == 0


def test_model_package_does_not_import_the_app():
    import subprocess
    import sys

    code = ("import sys, bgplvm, bgplvm.cli; from bgplvm import DynamicalGPLVM; "
            "bad = [m for m in sys.modules if m.split('.')[0] == 'panel' "
            "or m.startswith(('bgplvm.explorer', 'bgplvm.reproduce'))]; "
            "print(bad); assert not bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_summary_of_a_data_free_asset_says_how_to_open_it(capsys):
    """The explorer's shipped models hold no data: summary says so and how to open one,
    not 'truncated or corrupt'."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "assets" / "cmu35_dynamical.npz"
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert "pre-trained models, shipped without its data" in err and "load_asset('cmu35')" in err
    assert "corrupt" not in err


def test_fit_chooses_an_npz_array_and_names_its_flags(tmp_path, capsys):
    """An .npz of several arrays: --key picks one (the message said "pass key=...", an
    option the command did not have); the model's errors name the command's flags."""
    data = tmp_path / "d.npz"
    np.savez(data, A=np.random.default_rng(0).standard_normal((60, 4)), B=np.ones((60, 4)))
    out = str(tmp_path / "o.npz")
    assert main(["fit", "--data", str(data), "--out", out]) == 2
    assert "--key" in capsys.readouterr().err
    assert main(["fit", "--data", str(data), "--key", "A", "-q", "2", "-m", "5", "--iters", "5", "--quiet",
                 "--out", out]) == 0
    capsys.readouterr()
    for args, flag in ((["-m", "80"], "--inducing"), (["--seed", "-1"], "--seed"), (["--iters", "-5"], "--iters")):
        assert main(["fit", "--data", str(data), "--key", "A", *args, "--out", out]) == 2
        err = capsys.readouterr().err
        assert flag in err and "fitting" not in err, err


def test_the_same_package_from_inside_the_repository_and_from_anywhere(tmp_path):
    """No folder of the repository is named like the package, so `import bgplvm` and the
    `bgplvm` command find the installed package wherever they run; a user's own model.py
    or explorer.py beside them is not picked up."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "model.py").write_text("raise SystemExit('the user model.py was imported')\n")
    (tmp_path / "explorer.py").write_text("raise SystemExit('the user explorer.py was imported')\n")
    code = "import bgplvm, bgplvm.explorer.cli; print(bgplvm.__file__, bgplvm.explorer.cli.__file__)"
    where = [subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True,
                            text=True).stdout for cwd in (Path(__file__).resolve().parents[1], tmp_path)]
    assert where[0] == where[1]
    assert not (Path(__file__).resolve().parents[1] / "bgplvm").exists()


def test_version(capsys):
    import bgplvm

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"bgplvm {bgplvm.__version__}"


def test_fit_of_several_views_writes_the_segmentation(tmp_path, capsys):
    from mrd_data import three_views

    views = three_views(N=60)
    for n, Y in views.items():
        np.save(tmp_path / f"{n}.npy", Y)
    out = tmp_path / "mrd.npz"
    args = ["fit", *sum([["--view", f"{n}={tmp_path / f'{n}.npy'}"] for n in views], []), "-q", "4", "-m", "10",
            "--iters", "60", "--out", str(out), "--quiet"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "segmentation (relative ARD weight > 0.1)" in text and "view 'c'" in text
    from bgplvm import MRD

    m = MRD.load(out)
    assert m.view_names == ["a", "b", "c"] and m.metadata["segmentation"]["on"] == m.segmentation().on
    assert main(["summary", str(out)]) == 0 and "shared by" in capsys.readouterr().out
    assert main(["fit", "--view", "a", "--out", str(out)]) == 2
    assert "--view takes NAME=FILE" in capsys.readouterr().err
