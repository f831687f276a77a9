"""Executable user-guide pages: jupytext "percent" scripts run as notebooks at build time.

Each ``guide/*.py`` under the documentation root is a page. Its cells::

    # %% [markdown]
    # # Title of the page          <- Markdown, every line commented with "# "
    # Some text, $\\alpha_q$ inline math, $$display math$$.

    # %%
    x = 1 + 1                      <- a code cell
    x

The extension parses the script into an nbformat notebook, executes it with nbclient
(the ``python3`` kernel of the Python running Sphinx, i.e. the project's venv; its working
directory a fresh temporary folder), and renders it: Markdown through markdown-it-py as raw
HTML, its headings as real sections (the first ``# Title`` is the page's title, so toctrees
and cross references work), code cells as highlighted Python, outputs as literal blocks
(text/plain, streams), images (image/png, written to files that Sphinx copies to
``_images``) and raw HTML (text/html without scripts; a live widget shows its
text/plain). The executed ``.ipynb`` is offered as a download at the top of the page and
written next to the built page. A cell that raises fails the build, naming the page and
the cell, with its traceback.

Pages are re-executed when they change, and all of them when a source file of the package
changed since the last build (so an incremental build does not keep stale outputs).

Pages are executed two at a time (each in its own kernel: on two cores the kernels'
start-up and single-threaded stretches overlap), before Sphinx reads them.

Settings (``conf.py``): ``notebooks_pattern`` (default ``"guide/*.py"``),
``notebooks_timeout`` (seconds per cell, default 1800), ``notebooks_watch`` (folders whose
``*.py`` files, when changed, re-execute every page), ``notebooks_jobs`` (pages executed at
once; default ``$BGPLVM_DOCS_JOBS`` or 2).
"""

from __future__ import annotations

import base64
import fnmatch
import os
import re
import tempfile
import time
from pathlib import Path

import nbformat
from docutils import nodes
from docutils.parsers import Parser
from markdown_it import MarkdownIt
from sphinx import addnodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL = re.compile(r"^# %%(.*)$")
_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?=\S)([^$\n]+?)(?<=\S)\$(?!\w)", re.S)


# --------------------------------------------------------------------------- percent format
def read_percent(text: str) -> nbformat.NotebookNode:
    """A jupytext percent script -> an nbformat v4 notebook (no outputs)."""
    cells: list[tuple[str, list[str]]] = []
    kind, lines = None, []
    for line in text.splitlines():
        m = _CELL.match(line)
        if m:
            if kind is not None or any(s.strip() for s in lines):
                cells.append((kind or "code", lines))
            kind = "markdown" if "[markdown]" in m.group(1) or "[md]" in m.group(1) else "code"
            lines = []
        else:
            lines.append(line)
    cells.append((kind or "code", lines))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, lines in cells:
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        if not lines:
            continue
        if kind == "markdown":
            body = "\n".join(ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines)
            nb.cells.append(nbformat.v4.new_markdown_cell(body))
        else:
            nb.cells.append(nbformat.v4.new_code_cell("\n".join(lines)))
    return nb


# --------------------------------------------------------------------------- execution
def execute(nb: nbformat.NotebookNode, timeout: int) -> None:
    """Run every cell in a fresh kernel of this Python; raises nbclient's CellExecutionError."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="bgplvm-docs-") as cwd, \
            tempfile.TemporaryDirectory(prefix="bgplvm-kernel-") as sockets:
        # the built-in python3 spec runs sys.executable (the venv's python), whatever kernels
        # the user has installed elsewhere. Over TCP the client picks free ports, closes them
        # and the kernel binds them a moment later; two kernels starting at once (or a Dask
        # cluster in another page) can take the same port and the kernel dies at start
        # ("Address already in use", then "Kernel didn't respond"). Unix sockets in a folder
        # of this run's own have no such race.
        km = KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[]),
                           **_transport(sockets))
        try:
            # the kernel's own log at ERROR: not its warning, at every start, that a local
            # kernel talks over TCP unencrypted
            NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3",
                           extra_arguments=["--IPKernelApp.log_level=ERROR"],
                           resources={"metadata": {"path": cwd}}).execute()
        finally:  # nbclient leaves a kernel manager it was given running
            if km.has_kernel:
                km.shutdown_kernel(now=False)


def _transport(folder: str) -> dict:
    """The kernel's sockets: Unix sockets named under ``folder`` where the OS has them,
    else TCP on the loopback."""
    if os.name != "posix":
        return {"transport": "tcp"}
    return {"transport": "ipc", "ip": os.path.join(folder, "k")}


def run_script(text: str, timeout: int) -> tuple[str, str | None, float]:
    """Parse and execute one percent script: (the executed notebook as JSON, the error
    message or None, seconds). Runs in a worker process of ``_execute_ahead``."""
    t0 = time.perf_counter()
    nb = read_percent(text)
    error = None
    try:
        execute(nb, timeout)
    except Exception as exc:  # CellExecutionError, DeadKernelError, timeout
        error = _ANSI.sub("", str(exc)) or repr(exc)
    return nbformat.writes(nb), error, time.perf_counter() - t0


def _execute_ahead(app, env, docnames):
    """Execute the notebook pages about to be read, ``notebooks_jobs`` at a time (each in
    its own kernel); the parser then renders the results (it executes a page itself when
    there is one page, or one job)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    todo = [d for d in docnames if _is_notebook(app, d)]
    jobs = max(1, int(app.config.notebooks_jobs))
    app.notebook_results = {}
    if len(todo) < 2 or jobs < 2:
        return
    logger.info("[notebooks] executing %d page(s), %d at a time", len(todo), jobs)
    # "spawn": a clean process, not a fork of Sphinx (threads, open files)
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_script, Path(env.doc2path(d)).read_text(encoding="utf-8"),
                               app.config.notebooks_timeout): d for d in todo}
        for fut in as_completed(futures):
            d = futures[fut]
            app.notebook_results[d] = fut.result()
            logger.info("[notebooks] %s executed in %.1f s", d, app.notebook_results[d][2])


# --------------------------------------------------------------------------- rendering
class _Markdown:
    """Markdown -> docutils nodes: raw HTML blocks, headings as sections."""

    def __init__(self):
        self.md = MarkdownIt("commonmark", {"html": True}).enable("table")

    def render(self, text: str, sections: list[tuple[int, nodes.Element]], document, math: list):
        stash: list[str] = []

        def hide(m):
            display = m.group(1) is not None
            tex = m.group(1) if display else m.group(2)
            stash.append(rf"\[{tex}\]" if display else rf"\({tex}\)")
            math.append(tex)
            return f"MATHPLACEHOLDER{len(stash) - 1}X"

        tokens = self.md.parse(_MATH.sub(hide, text))

        def html(toks):
            out = self.md.renderer.render(toks, self.md.options, {})
            out = re.sub(r"MATHPLACEHOLDER(\d+)X", lambda m: _escape(stash[int(m.group(1))]), out)
            return out

        i, start = 0, 0
        while i < len(tokens):
            t = tokens[i]
            if t.type == "heading_open":
                if i > start:
                    _current(sections).append(nodes.raw("", html(tokens[start:i]), format="html"))
                level = int(t.tag[1])
                parts = []  # the heading's text and inline code (emphasis markers dropped)
                for c in tokens[i + 1].children or []:
                    text = re.sub(r"MATHPLACEHOLDER(\d+)X", lambda m: stash[int(m.group(1))], c.content)
                    if c.type == "code_inline":
                        parts.append(nodes.literal(text, text))
                    elif c.type in ("text", "html_inline"):
                        parts.append(nodes.Text(text))
                    elif c.type in ("softbreak", "hardbreak"):
                        parts.append(nodes.Text(" "))
                _open_section(sections, level, parts, document)
                i += 3
                start = i
                continue
            i += 1
        if start < len(tokens):
            _current(sections).append(nodes.raw("", html(tokens[start:]), format="html"))


def _escape(tex: str) -> str:
    return tex.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _current(sections):
    return sections[-1][1]


def _open_section(sections, level: int, parts: list, document) -> None:
    while len(sections) > 1 and sections[-1][0] >= level:
        sections.pop()
    sec = nodes.section()
    title = nodes.title("", "", *parts)
    sec += title
    sec["names"].append(nodes.fully_normalize_name(title.astext().strip()))
    document.note_implicit_target(sec, sec)
    _current(sections).append(sec)
    sections.append((level, sec))


def _text_block(text: str, cls: str) -> nodes.literal_block:
    text = _ANSI.sub("", text).rstrip("\n")
    block = nodes.literal_block(text, text, language="none")
    block["classes"] += ["nb-output", cls]
    return block


class PercentNotebookParser(Parser):
    """Parses, executes and renders one percent script (see the module docstring)."""

    supported = ("percent-notebook",)

    def parse(self, inputstring: str, document) -> None:
        env = document.settings.env
        app = env.app
        docname = env.docname
        ahead = getattr(app, "notebook_results", {}).pop(docname, None)
        if ahead is None:
            ahead = run_script(inputstring, app.config.notebooks_timeout)
            logger.info("[notebooks] %s executed in %.1f s", docname, ahead[2])
        text, error, seconds = ahead
        nb = nbformat.reads(text, as_version=4)
        if error is not None:
            logger.error("notebook %s failed:\n%s", docname, error, location=docname)
            env.notebooks_failed = getattr(env, "notebooks_failed", set()) | {docname}
        out_dir = Path(app.doctreedir).parent / "notebook_outputs" / docname
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.glob("*.png"):
            old.unlink()
        name = Path(docname).name
        ipynb = out_dir / f"{name}.ipynb"
        nbformat.write(nb, ipynb)
        env.notebook_times = getattr(env, "notebook_times", {})
        env.notebook_times[docname] = seconds

        doc_dir = Path(env.doc2path(docname)).parent

        def rel(p: Path) -> str:
            return Path(os.path.relpath(p, doc_dir)).as_posix()

        sections: list[tuple[int, nodes.Element]] = [(0, document)]
        math: list[str] = []
        md = _Markdown()
        first = True
        n_png = 0
        for k, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown":
                md.render(cell.source, sections, document, math)
                if first and len(sections) > 1:
                    first = False
                    para = nodes.paragraph()
                    para += nodes.Text("Run it yourself: ")
                    dl = addnodes.download_reference("", "", refdoc=docname, reftarget=rel(ipynb),
                                                     refexplicit=True, reftype="download")
                    dl += nodes.literal(f"{name}.ipynb", f"{name}.ipynb")
                    para += dl
                    para += nodes.Text(" (this page, executed), or the source ")
                    para += nodes.literal(f"docs/{docname}.py", f"docs/{docname}.py")
                    para += nodes.Text(" in the repository.")
                    para["classes"].append("nb-download")
                    _current(sections).append(para)
                continue
            code = nodes.literal_block(cell.source, cell.source, language="python")
            code["classes"].append("nb-input")
            _current(sections).append(code)
            for out in cell.get("outputs", []):
                if out.output_type == "stream":
                    if out.text.strip():
                        _current(sections).append(_text_block(out.text, "nb-" + out.name))
                elif out.output_type == "error":
                    _current(sections).append(_text_block("\n".join(out.traceback), "nb-error"))
                else:
                    data = out.get("data", {})
                    if "image/png" in data:
                        n_png += 1
                        png = out_dir / f"cell{k:02d}_{n_png}.png"
                        raw = base64.b64decode(data["image/png"])
                        png.write_bytes(raw)
                        img = nodes.image(uri=rel(png), alt=f"output of cell {k}")
                        px = int.from_bytes(raw[16:20], "big") if raw[:4] == b"\x89PNG" else 0
                        if px > 700:  # the project's figures are drawn at twice their size
                            img["width"] = f"{px // 2}px"
                        img["classes"].append("nb-image")
                        _current(sections).append(img)
                    elif "text/html" in data and "<script" not in data["text/html"]:
                        # static HTML (tables); HTML with scripts is a live widget (Panel,
                        # Bokeh) that needs its kernel: shown by its text/plain, if any
                        _current(sections).append(nodes.raw("", data["text/html"], format="html"))
                    elif "text/plain" in data:
                        _current(sections).append(_text_block(data["text/plain"], "nb-result"))
        if len(sections) == 1 or not any(isinstance(n, nodes.section) for n in document.children):
            logger.warning("notebook %s has no '# Title' Markdown heading", docname, location=docname)


# --------------------------------------------------------------------------- events
def _source_stamp(app) -> float:
    """The newest modification time of the watched package sources."""
    root = Path(app.confdir)
    newest = 0.0
    for folder in app.config.notebooks_watch:
        for p in (root / folder).resolve().rglob("*.py"):
            newest = max(newest, p.stat().st_mtime)
    return newest


def _is_notebook(app, docname: str) -> bool:
    return fnmatch.fnmatch(docname + ".py", app.config.notebooks_pattern)


def _outdated(app, env, added, changed, removed):
    """Every notebook page re-executes when the package's sources changed since the last
    build, and a page that failed then runs again (its error is not kept as its output)."""
    stamp = _source_stamp(app)
    old = getattr(env, "notebooks_source_stamp", None)
    env.notebooks_source_stamp = stamp
    again = set(getattr(env, "notebooks_failed", set()))
    env.notebooks_failed = set()
    if old is not None and old != stamp:
        again |= {d for d in env.found_docs if _is_notebook(app, d)}
    return sorted(d for d in again if d in env.found_docs and d not in added | changed)


def _finished(app, exc):
    if exc is not None:
        return
    times = getattr(app.env, "notebook_times", {})
    if times:
        logger.info("[notebooks] executed %d page(s) this build: %s", len(times),
                    ", ".join(f"{d} {s:.0f} s" for d, s in sorted(times.items())))
    if app.builder.format == "html":
        # the executed notebooks, next to their pages
        for docname in app.env.found_docs:
            if _is_notebook(app, docname):
                src = Path(app.doctreedir).parent / "notebook_outputs" / docname / (Path(docname).name + ".ipynb")
                if src.is_file():
                    dst = Path(app.outdir) / (docname + ".ipynb")
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    dst.write_bytes(src.read_bytes())
    failed = sorted(getattr(app.env, "notebooks_failed", set()))
    if failed:  # the build fails, with or without -W
        logger.error("%d notebook page(s) failed to execute: %s (the cells and tracebacks are above)",
                     len(failed), ", ".join(failed))
        app.statuscode = 1


def setup(app):
    app.add_config_value("notebooks_pattern", "guide/*.py", "env")
    app.add_config_value("notebooks_timeout", 1800, "env")
    app.add_config_value("notebooks_watch", [], "env")
    app.add_config_value("notebooks_jobs", int(os.environ.get("BGPLVM_DOCS_JOBS", "2")), "")
    app.add_source_suffix(".py", "percent-notebook")
    app.add_source_parser(PercentNotebookParser)
    app.connect("env-get-outdated", _outdated)
    app.connect("env-before-read-docs", _execute_ahead)
    app.connect("build-finished", _finished)
    app.set_html_assets_policy("always")  # MathJax on every page: guide pages write $...$
    return {"version": "1.0", "parallel_read_safe": False, "parallel_write_safe": True}
