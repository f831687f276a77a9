"""What a reproduction writes: ``Result`` (numbers, tables beside the paper's, figures) and
the gathered report ``REPORT.md``."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bgplvm.io import atomic_write_bytes

REPORT_NAME = "REPORT.md"
ROOT = Path(__file__).resolve().parents[1]


def _git(root: Path, *args: str) -> str:
    """``git -C root ARGS``'s output (raises OSError / SubprocessError without git or a checkout)."""
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=10, check=True).stdout.strip()


def code_version(root: Path = ROOT) -> str | None:
    """The commit the code runs from ("abc1234", or "abc1234+changes" with uncommitted
    changes to tracked files other than the reproduction outputs); None outside a git
    checkout. A reproduction records it, so that a table made before a change of defaults
    says which code made it."""
    try:
        head = _git(root, "rev-parse", "--short", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                     ":(exclude)reproduction")
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if dirty else "")


def cpu_name() -> str:
    """The CPU's model name ("AMD EPYC 7B13", ...; platform.processor() where /proc/cpuinfo
    is missing)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def numpy_simd() -> dict:
    """numpy's SIMD paths on this machine: the features its build assumes (baseline), the
    ones it found on the CPU and dispatches to. The last bits of np.sin, np.exp, ... follow
    these, so figures computed from them can differ between machines by rounding."""
    try:
        from numpy._core import _multiarray_umath as mu  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core import _multiarray_umath as mu
    found = [k for k, v in getattr(mu, "__cpu_features__", {}).items() if v]
    dispatch = list(getattr(mu, "__cpu_dispatch__", []))
    return {"baseline": list(getattr(mu, "__cpu_baseline__", [])),
            "dispatched": [k for k in dispatch if k in found],
            "not_found": [k for k in dispatch if k not in found]}


def machine_info() -> dict:
    """Where a run's numbers were computed: Python, numpy and its SIMD paths, the CPU."""
    import numpy as np

    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "cpu": cpu_name(), "numpy": np.__version__, "numpy_simd": numpy_simd()}


#: what a reproduction's numbers come from: a change under these paths since a result's
#: commit may change them (``stale_results``)
NUMBERS_CODE = ("model", "datasets")


def stale_results(out_dir: Path, root: Path = ROOT) -> list[dict]:
    """For every ``*/result.json`` under ``out_dir``: its experiment, the commit it ran
    from and how many commits since then changed the model or the data sets
    (``NUMBERS_CODE``) or its experiment module and the modules it uses
    (``module_closure``): a table is out of date when the code that made it has changed
    (REPORT.md does not notice).
    ``changed`` is None where it cannot be told (no commit recorded, or no git)."""
    from . import EXPERIMENTS

    def count(commit: str, *paths: str) -> int | None:
        try:
            return int(_git(root, "rev-list", "--count", f"{commit}..HEAD", "--", *paths))
        except (OSError, subprocess.SubprocessError, ValueError):
            return None

    rows = []
    for f in sorted(Path(out_dir).glob("*/result.json")):
        name = f.parent.name
        try:
            code = json.loads(f.read_text(encoding="utf-8")).get("code") or None
        except (OSError, ValueError):
            code = None
        commit = code.split("+")[0] if code else None
        module = EXPERIMENTS.get(name, (None,))[0]
        files = [f"reproduce/{m}.py" for m in sorted(module_closure(module))] if module else []
        rows.append({"name": name, "code": code,
                     "changed": count(commit, *NUMBERS_CODE) if commit else None,
                     "module_changed": count(commit, *files) if commit and files else None})
    return rows


#: modules of the report machinery that format numbers but do not compute them
_NOT_NUMBERS = frozenset({"report", "drawing", "lineplots", "cli"})


def module_closure(module: str, here: Path = Path(__file__).resolve().parent) -> set[str]:
    """The experiment module ``module`` and every module of this package it imports,
    directly or through another (``from . import x``, ``from .x import y``), except the
    report and plotting helpers (``_NOT_NUMBERS``): the code whose change may change the
    experiment's numbers."""
    import ast

    seen: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        if m in seen or m in _NOT_NUMBERS or not (here / f"{m}.py").is_file():
            continue
        seen.add(m)
        for node in ast.walk(ast.parse((here / f"{m}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                todo += [node.module] if node.module else [a.name for a in node.names]
    return seen


@dataclass
class Context:
    """Settings of one run. ``quick`` shrinks iteration counts for a smoke run (the numbers
    are then not the reproduction: the table says so)."""

    out_dir: Path
    mirror: str | None = None
    quick: bool = False
    seed: int = 0
    verbose: bool = True
    started: float = field(default_factory=time.perf_counter)

    def log(self, *msg) -> None:
        if self.verbose:
            print(f"[{time.perf_counter() - self.started:7.1f}s]", *msg, file=sys.stderr, flush=True)

    def figure_path(self, name: str, filename: str) -> Path:
        d = Path(self.out_dir) / name
        d.mkdir(parents=True, exist_ok=True)
        return d / filename


@dataclass
class Table:
    """A markdown table: ``columns`` names, ``rows`` lists of cells (numbers or text)."""

    title: str
    columns: list[str]
    rows: list[list]
    note: str = ""

    def markdown(self) -> str:
        def cell(v):
            if isinstance(v, float):
                return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
            return "-" if v is None else str(v)

        out = [f"**{self.title}**", "", "| " + " | ".join(self.columns) + " |",
               "|" + "---|" * len(self.columns)]
        out += ["| " + " | ".join(cell(v) for v in r) + " |" for r in self.rows]
        if self.note:
            out += ["", self.note]
        return "\n".join(out)


@dataclass
class Result:
    """One experiment's outcome. ``numbers`` is free-form JSON (every figure reported);
    ``tables`` are shown in table.md and REPORT.md; ``figures`` are file names in the
    experiment's folder; ``settings`` what was run (sizes, iterations, seeds)."""

    name: str
    title: str
    paper_section: str
    tables: list[Table]
    numbers: dict
    settings: dict
    figures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    quick: bool = False
    wall_time_s: float | None = None
    code: str | None = None  # ``code_version()`` of the run
    written_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    #: ``machine_info()`` where the numbers were computed (rounding differs between CPUs)
    environment: dict = field(default_factory=machine_info)

    def markdown(self) -> str:
        head = [f"## `{self.name}`: {self.title}", "",
                f"Paper section: {self.paper_section}."
                + (f" Wall time {self.wall_time_s:.0f} s." if self.wall_time_s else "")
                + (f" Run on {self.written_at[:10]} from commit `{self.code}`." if self.code else "")
                + f" Machine: {_machine_line(self.environment)}."]
        if self.quick:
            head.append("**Quick smoke run (--quick): not the reproduction; iteration counts were cut.**")
        body = [t.markdown() for t in self.tables]
        notes = [f"- {n}" for n in self.notes]
        figs = [f"![{f}]({self.name}/{f})" for f in self.figures if f.endswith(".png")]
        return "\n\n".join(["\n".join(head), *body, "\n".join(notes), "\n".join(figs)]).strip() + "\n"

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "paper_section": self.paper_section,
                "quick": self.quick, "wall_time_s": self.wall_time_s, "settings": self.settings,
                "numbers": self.numbers, "notes": self.notes, "figures": self.figures,
                "tables": [t.__dict__ for t in self.tables], "markdown": self.markdown(),
                "environment": self.environment,
                "code": self.code, "written_at": self.written_at}

    def write(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "result.json", json.dumps(self.to_json(), indent=1, default=float))
        atomic_write_text(folder / "table.md", self.markdown())


def _machine_line(env: dict) -> str:
    """One line of ``machine_info()``: CPU, numpy and the SIMD paths it dispatches to."""
    simd = env.get("numpy_simd") or {}
    return (f"{env.get('cpu', '?')} ({env.get('cpus', '?')} CPUs), numpy {env.get('numpy', '?')} "
            f"with {' '.join(simd.get('dispatched', [])) or 'no dispatched'} SIMD paths"
            + (f" (not on this CPU: {' '.join(simd['not_found'])})" if simd.get("not_found") else ""))


def atomic_write_text(path: Path, text: str) -> None:
    """UTF-8 text, written atomically (``bgplvm.io.atomic_write_bytes``)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def gather_report(out_dir: Path) -> Path:
    """(Re)write ``out_dir/REPORT.md`` from every ``*/result.json`` below ``out_dir``."""
    out_dir = Path(out_dir)
    parts = ["# Reproduction report", "",
             "Each section is written by `bgplvm reproduce NAME` (JSON, figures and this table in "
             "the folder of the same name); the paper's numbers stand beside ours. "
             "Regenerated after every run.", ""]
    for f in sorted(out_dir.glob("*/result.json")):
        try:
            r = json.loads(f.read_text(encoding="utf-8"))
            md = r["markdown"]
            if not r.get("code"):  # made before runs recorded their commit
                md = md.replace("\n\n", f"\n\nRun on {r.get('written_at', '?')[:10]}, before runs "
                                "recorded their commit.\n\n", 1)
            parts.append(md)
        except (OSError, ValueError, KeyError):
            parts.append(f"## `{f.parent.name}`\n\n(result.json unreadable)\n")
    path = out_dir / REPORT_NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(parts))
    return path
