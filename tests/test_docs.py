"""The documentation builds: every user-guide page (docs/guide/*.py) executed, warnings as
errors, every name of ``bgplvm.__all__`` in the API reference.

The build runs as ``bash scripts/docs.sh`` runs it (``sphinx-build -W --keep-going``), into
a temporary folder, with the guide's iterations cut (``BGPLVM_DOCS_QUICK=1``:
``bgplvm.docs_utils.reduce_in_tests``). The guide's pages load real data sets: without them
offline (a clone without ``../shared``) the test skips, naming them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirror import require_data

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GUIDE = sorted((DOCS / "guide").glob("*.py"))
#: calls that put a figure in a page's output
FIGURE_CALLS = re.compile(r"\b(ard_bars|latent_scatter|line_band|image_row|Image)\(")


def _datasets_used() -> list[str]:
    names = set()
    for page in GUIDE:
        names.update(re.findall(r"""\bload\(\s*["']([\w-]+)["']""", page.read_text()))
    return sorted(names)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for mod in ("sphinx", "nbclient", "nbformat", "ipykernel", "markdown_it"):
        pytest.importorskip(mod, reason=f"the docs build needs {mod} (pip install -e .[docs])")
    require_data(*_datasets_used())
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ, BGPLVM_DOCS_QUICK="1")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
                           "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
                          env=env, capture_output=True, text=True, timeout=1800)
    print(f"\ndocs build: {time.perf_counter() - t0:.0f} s")
    timings = [ln for ln in proc.stdout.splitlines() if ln.startswith("[notebooks] executed")]
    print("\n".join(timings))
    assert proc.returncode == 0, (f"sphinx-build -W failed ({proc.returncode}):\n"
                                  f"{proc.stderr[-12000:]}\n--- stdout (end) ---\n{proc.stdout[-3000:]}")
    return out / "html"


def test_the_build_succeeds_with_warnings_as_errors(site):
    assert (site / "index.html").is_file()
    for page in ("tour", "performance", "dask", "data", "explorer_app", "install", "reproductions"):
        assert (site / f"{page}.html").is_file(), page


@pytest.mark.parametrize("guide_page", [p.stem for p in GUIDE])
def test_every_guide_page_is_executed_with_its_outputs(site, guide_page):
    page = guide_page
    html = (site / "guide" / f"{page}.html").read_text()
    nb = json.loads((site / "guide" / f"{page}.ipynb").read_text())  # the executed notebook
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c.get("execution_count") for c in code), f"{page}: a code cell did not run"
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert any(c["outputs"] for c in code), f"{page}: no outputs at all"
    assert "nb-output" in html or "nb-image" in html
    assert re.search(r"<h1>.+</h1>", html), f"{page}: no page title"
    src = (DOCS / "guide" / f"{page}.py").read_text()
    if FIGURE_CALLS.search(src):
        imgs = re.findall(r'<img[^>]+src="(\.\./_images/[^"]+\.png)"', html)
        assert imgs, f"{page} draws a figure but shows no PNG"
        for src_ in imgs:
            assert (site / "guide" / src_).resolve().is_file(), src_


def test_every_public_name_is_in_the_api_reference(site):
    import bgplvm

    api = "".join(p.read_text() for p in (site / "api").glob("*.html"))
    missing = [n for n in bgplvm.__all__ if f'id="bgplvm.{n}"' not in api]
    assert not missing, f"not documented in the API reference: {missing}"


def test_a_failing_cell_fails_the_build_naming_the_cell(tmp_path):
    """The extension on a two-page project of its own (no data, no package imports): a page
    whose cell raises fails the build (without -W), with the cell and the traceback; the
    pages' kernels (two at once) talk over Unix sockets."""
    pytest.importorskip("nbclient")
    src = tmp_path / "src"
    (src / "guide").mkdir(parents=True)
    (src / "conf.py").write_text(f"import sys; sys.path.insert(0, {str(DOCS / '_ext')!r})\n"
                                 "extensions = ['notebooks']\nexclude_patterns = ['conf.py']\n")
    (src / "index.rst").write_text("Test\n====\n\n.. toctree::\n   :glob:\n\n   guide/*\n")
    (src / "guide" / "good.py").write_text("# %% [markdown]\n# # Good\n# Text with $a^2$.\n\n"
                                           "# %%\nprint('hello')\n6 * 7\n\n"
                                           "# %%\nimport json\nfrom ipykernel.connect import get_connection_info\n"
                                           "print('transport:', json.loads(get_connection_info())['transport'])\n")
    (src / "guide" / "bad.py").write_text("# %% [markdown]\n# # Bad\n\n# %%\nx = 1\n\n"
                                          "# %%\ndef broken():\n    return 1 / 0\nbroken()\n")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", str(src), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    err = proc.stderr
    assert "guide/bad" in err and "ZeroDivisionError" in err and "return 1 / 0" in err, err[-3000:]
    html = (tmp_path / "out" / "guide" / "good.html").read_text()
    assert "<h1>Good" in html and "hello" in html and "42" in html and r"\(a^2\)" in html
    # Unix sockets: no TCP ports picked then bound, which two kernels starting at once raced
    # for (a CI run failed on "Address already in use")
    if os.name == "posix":
        assert "transport: ipc" in html
