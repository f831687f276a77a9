"""The reproduction report's bookkeeping: which code a result came from, and whether that
code has changed since (``bgplvm reproduce --stale``)."""

from __future__ import annotations

import json
import subprocess

import pytest

from bgplvm.reproduce.cli import main
from bgplvm.reproduce.report import ROOT, stale_results


def _git(*args) -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")


def _result(folder, name, code):
    (folder / name).mkdir(parents=True)
    (folder / name / "result.json").write_text(json.dumps({"name": name, "code": code}))


def test_stale_results_count_the_model_changes_since_a_run(tmp_path, capsys):
    head = _git("rev-parse", "--short", "HEAD")
    # the last commit before the newest change under model/ or datasets/
    last = _git("log", "-1", "--format=%h", "--", "model", "datasets")
    if not last:
        pytest.skip("no history of model/ here")
    before = _git("rev-parse", "--short", f"{last}^")
    _result(tmp_path, "usps", head)
    _result(tmp_path, "cmu35", before + "+changes")
    _result(tmp_path, "oil-test", None)
    rows = {r["name"]: r for r in stale_results(tmp_path)}
    assert rows["usps"]["changed"] == 0 and rows["usps"]["module_changed"] == 0
    assert rows["cmu35"]["changed"] >= 1 and rows["cmu35"]["code"] == before + "+changes"
    assert rows["oil-test"]["changed"] is None
    assert main(["--stale", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "cmu35" in out and "STALE" in out and "bgplvm reproduce cmu35" in out
    assert "oil-test" in out and "cannot tell" in out
    (tmp_path / "cmu35" / "result.json").unlink()
    assert main(["--stale", "--out", str(tmp_path)]) == 0


def test_an_experiment_depends_on_the_reproduce_modules_it_imports():
    from bgplvm.reproduce.report import module_closure

    # cmu35-static reuses cmu35's rows, which use the shared protocol and model helpers
    assert module_closure("cmu35_static") == {"cmu35_static", "cmu35", "cmu35_protocol", "models", "forms"}
    # the report and plotting helpers format numbers; they do not make them
    assert module_closure("mackey_glass") == {"mackey_glass"}
    assert module_closure("no_such_module") == set()


def test_a_result_records_the_cpu_and_numpys_simd_paths(tmp_path):
    """Rounding differs between CPUs (np.sin's SIMD paths): a result says where it was computed."""
    from bgplvm.reproduce.report import Result, machine_info

    env = machine_info()
    assert env["cpu"] and env["numpy"] and isinstance(env["numpy_simd"]["baseline"], list)
    r = Result(name="t", title="T", paper_section="none", tables=[], numbers={}, settings={}, code="abc1234")
    r.write(tmp_path)
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["environment"] == env and saved["code"] == "abc1234"
    head = (tmp_path / "table.md").read_text().splitlines()[2]
    assert f"from commit `abc1234`. Machine: {env['cpu']}" in head and f"numpy {env['numpy']}" in head


def test_mrd_toy_quick_run_counts_the_recovered_segmentations(tmp_path):
    from bgplvm.reproduce import EXPERIMENTS, Context
    from bgplvm.reproduce import mrd_toy

    assert "mrd-toy" in EXPERIMENTS
    assert mrd_toy.truth() == {("a", "b", "c"): 1, ("a", "b"): 1, ("a",): 1, ("c",): 1}
    res = mrd_toy.run(Context(out_dir=tmp_path, quick=True, verbose=False))
    rows = res.tables[0].rows
    assert [(r[0], r[1]) for r in rows] == mrd_toy.CHOICES
    assert all(r[2].endswith("of 2") for r in rows) and all(r[3] == r[3] for r in rows)  # bounds, not NaN
    assert res.numbers["best"]["inducing"] in ("per_view", "shared")


def test_mrd_pose_quick_run_writes_the_error_table_and_json(tmp_path):
    from mirror import require_data

    require_data("ankur_pose")
    from bgplvm.reproduce import EXPERIMENTS, Context, run
    from bgplvm.reproduce import mrd_pose

    assert "mrd-pose" in EXPERIMENTS
    res = run("mrd-pose", Context(out_dir=tmp_path, quick=True, verbose=False))
    labels = [r[0] for r in res.tables[0].rows]
    init, widths = res.numbers["chosen"]["init"], res.numbers["chosen"]["widths"]
    assert (init, widths) in mrd_pose.STARTS and res.numbers["chosen"]["readout"] in mrd_pose.READOUTS
    assert len(res.tables[2].rows) == len(mrd_pose.STARTS)  # every start tried on the held-out frames
    assert labels[:4] == [f"MRD ({init}, widths {widths}): {mrd_pose.READOUT_NAMES[r]}" + (" **(chosen)**" if r == res.numbers[
        "chosen"]["readout"] else "") for r in mrd_pose.READOUTS + ("best_of_k",)]
    assert labels[4:6] == ["pose of the nearest training silhouette", "mean training pose"]
    assert labels[6].startswith("GPy") and res.tables[0].rows[6][1] == "not run (--quick)"  # skipped, saying why
    t = res.numbers["test_errors"]
    assert 0 < t["nearest_silhouette"] < t["mean_pose"] and t["gpy"] is None
    assert all(e is None or e > 0 for e in t["mrd"].values())
    saved = json.loads((tmp_path / "mrd-pose" / "result.json").read_text())
    assert saved["quick"] and saved["numbers"]["chosen"] == res.numbers["chosen"]
    assert "| pose of the nearest training silhouette |" in (tmp_path / "mrd-pose" / "table.md").read_text()
    assert (tmp_path / "mrd-pose" / "ard.png").stat().st_size > 1000
    assert set(saved["numbers"]["final_fit"]["ard"]) == {"silhouette", "pose"}
