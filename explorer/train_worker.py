"""Training off the server: one fit per worker process, at lower priority, few threads.

The explorer serves every session from one Python process. A fit run inside it (even in
a thread) holds the interpreter between Numba calls and its Numba/BLAS threads take the
cores the sessions need, so everybody's mouse moves slow down. Here a fit runs in its own
process:

* below the server (:func:`choose_priority`): at ``SCHED_IDLE`` on Linux (a core runs
  the fit only when nobody else wants it, so the other sessions' pages keep their speed)
  when other programs leave a core idle, else at ``nice`` +``NICE`` (a ``SCHED_IDLE`` fit
  never runs while programs of its scheduling group keep every core busy); and with
  ``NUMBA_NUM_THREADS`` / BLAS threads capped at ``BGPLVM_TRAIN_THREADS`` (default 1);
* at most ``BGPLVM_MAX_TRAINERS`` (default: half the cores, at least 1) run at once per
  server; later jobs wait in a queue and say so;
* the job and the model travel as files in a private temporary directory (the data as
  .npz, the model as a bgplvm model file, never pickle); progress comes back as one JSON
  line per optimiser iteration on the worker's stdout; "stop" on its stdin ends the fit at
  the current iteration and the best point so far is saved.

``python -m bgplvm.explorer.train_worker DIR`` is the worker's entry point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

#: Nice increment of training workers (0..19; higher = lower priority).
NICE = 10


def train_threads() -> int:
    try:
        return max(1, int(os.environ.get("BGPLVM_TRAIN_THREADS", "1")))
    except ValueError:
        return 1


#: Seconds over which the machine's load is measured before a worker starts.
LOAD_WINDOW = 0.5

#: A worker that got less than ``STARVED_SHARE`` of a core over ``STARVED_SECONDS`` is
#: starved: the page says it waits for CPU.
STARVED_SECONDS = 10.0
STARVED_SHARE = 0.1


def choose_priority() -> str:
    """``"idle"`` or ``"nice"`` for the next worker: ``BGPLVM_TRAIN_PRIORITY`` if set to one
    of them, else ``"idle"`` when other processes leave at least half a core idle over
    ``LOAD_WINDOW`` seconds (this process, the server, does not count) and ``"nice"`` when
    they keep every core busy.

    Starvation needs busy programs in the fit's own scheduling group: the same session
    (Linux's autogroup gives each session, e.g. each terminal, its own CPU share) or the
    same container / cgroup; a busy program started from another terminal does not starve
    a SCHED_IDLE fit. The load measured here cannot tell the two apart, so a machine kept
    busy by anything gets the niced fit.

    Measured on the 2-core machine (bench/README.md, "Many users at once"): with a
    ``SCHED_IDLE`` fit beside it, another session's mouse moves took 1.1-1.2x their time
    alone, 1.5-1.8x with a nice +10 fit (Linux's EEVDF scheduler lets a niced task finish
    its slice before a waking server thread runs); with two busy programs on the two
    cores, 4 iterations of a small model did not finish in 2 minutes at ``SCHED_IDLE``
    and took 12 s at nice +10 (busy loops, server and worker in one session)."""
    forced = os.environ.get("BGPLVM_TRAIN_PRIORITY", "").strip().lower()
    if forced in ("idle", "nice"):
        return forced
    from bgplvm._numba_config import idle_cores

    free = idle_cores.measure(LOAD_WINDOW)
    return "nice" if free is not None and free < 0.5 else "idle"


def max_trainers() -> int:
    try:
        return max(1, int(os.environ["BGPLVM_MAX_TRAINERS"]))
    except (KeyError, ValueError):
        return max(1, (os.cpu_count() or 2) // 2)


_slots_lock = threading.Lock()
_slots: threading.BoundedSemaphore | None = None


def _trainer_slots() -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(max_trainers())
        return _slots


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``), else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def worker_env(threads: int | None = None, priority: str = "idle") -> dict:
    """Environment of a worker: capped Numba, OpenMP and BLAS threads, and its priority."""
    n = str(threads or train_threads())
    env = dict(os.environ)
    env.update(NUMBA_NUM_THREADS=n, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n,
               PYTHONUNBUFFERED="1", BGPLVM_TRAIN_PRIORITY=priority)
    return env


class WorkerTrainingJob:
    """One model fit in a worker process. The public surface is what ``ExplorerState``
    uses: ``start()``, ``stop()``, ``snapshot()``, ``join()``, ``done``, ``model``,
    ``error``, ``stopped``, ``queued``, ``t_start``, ``t_end``, ``max_iters``, ``dataset``."""

    def __init__(self, dataset, config: dict, max_iters: int, dynamical: bool = False,
                 time_kernel: str = "matern32"):
        self.dataset = dataset
        self.config = dict(config)
        self.max_iters = int(max_iters)
        self.dynamical = bool(dynamical)
        self.time_kernel = time_kernel
        self.model = None
        self.error: str | None = None
        self.stopped = False
        self.queued = True
        self.priority: str | None = None  # "idle" or "nice", chosen when the worker starts
        self._cpu_mark: tuple[float, float] | None = None
        self._starved = False
        self.pid: int | None = None
        self.done = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._history: list[tuple[int, float, str]] = []
        self._proc: subprocess.Popen | None = None
        self.t_start = time.perf_counter()
        self.t_end: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="bgplvm-train-job")

    # ---- public
    def start(self) -> "WorkerTrainingJob":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.write(b"stop\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                pass

    def kill(self) -> None:
        """End the worker now (session closed): no model is kept."""
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def snapshot(self) -> list[tuple[int, float, str]]:
        with self._lock:
            return list(self._history)

    def starved(self) -> bool:
        """The worker runs but got less than ``STARVED_SHARE`` of a core over the last
        ``STARVED_SECONDS`` (its CPU time from ``/proc``; False where unreadable). Updated
        once per ``STARVED_SECONDS``."""
        pid = self.pid
        if pid is None or self.done.is_set():
            return False
        cpu = _cpu_seconds(pid)
        if cpu is None:
            return False
        now = time.perf_counter()
        if self._cpu_mark is None:
            self._cpu_mark = (now, cpu)
        elif now - self._cpu_mark[0] >= STARVED_SECONDS:
            t0, c0 = self._cpu_mark
            self._starved = (cpu - c0) / (now - t0) < STARVED_SHARE
            self._cpu_mark = (now, cpu)
        return self._starved

    def join(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)

    # ---- the job thread (no parameters touched here)
    def _run(self) -> None:
        slots = _trainer_slots()
        tmp = None
        try:
            while not slots.acquire(timeout=0.2):
                if self._stop.is_set():
                    self.stopped = True
                    return
            try:
                self.queued = False
                self.t_start = time.perf_counter()
                if self._stop.is_set():
                    self.stopped = True
                    return
                tmp = Path(tempfile.mkdtemp(prefix="bgplvm-train-"))
                self.priority = choose_priority()
                self._write_job(tmp)
                self._run_worker(tmp)
            finally:
                slots.release()
        except Exception as e:  # reported in the page; the session goes on
            self.error = f"{type(e).__name__}: {e}"
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            self.t_end = time.perf_counter()
            self.done.set()

    def _write_job(self, tmp: Path) -> None:
        ds = self.dataset
        arrays = {"Y": np.ascontiguousarray(ds.Y, dtype=np.float64)}
        if self.dynamical:
            if ds.times is None:
                raise ValueError("a dynamical model needs time stamps")
            arrays["t"] = np.asarray(ds.times, dtype=np.float64)
            seq = ds.sequence if ds.sequence is not None else np.zeros(ds.N, dtype=np.int64)
            arrays["sequences"] = np.asarray(seq)
        np.savez(tmp / "data.npz", **arrays)
        job = dict(config=self.config, max_iters=self.max_iters, dynamical=self.dynamical,
                   time_kernel=self.time_kernel, dataset=ds.name)
        (tmp / "job.json").write_text(json.dumps(job))

    def _run_worker(self, tmp: Path) -> None:
        from bgplvm import BayesianGPLVM

        err = open(tmp / "stderr.txt", "wb")
        try:
            self._proc = proc = subprocess.Popen(
                [sys.executable, "-m", "bgplvm.explorer.train_worker", str(tmp)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, env=worker_env(priority=self.priority))
            self.pid = proc.pid
            if self._stop.is_set():
                self.stop()
            for line in proc.stdout:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("event") == "iteration":
                    with self._lock:
                        self._history.append((int(msg["iteration"]), float(msg["bound"]), str(msg.get("phase", ""))))
            proc.wait()
        finally:
            err.close()
        out = tmp / "model.npz"
        if proc.returncode == 0 and out.is_file():
            m = BayesianGPLVM.load(out)
            m.metadata = dict(m.metadata or {}, dataset=self.dataset.name)
            self.model = m
            self.stopped = self._stop.is_set()
            return
        if self._stop.is_set() and proc.returncode != 0:
            self.stopped = True
            raise RuntimeError("training was stopped before a model could be saved")
        tail = (tmp / "stderr.txt").read_bytes().decode(errors="replace").strip().splitlines()
        reason = next((ln for ln in reversed(tail) if ln.strip()), f"exit status {proc.returncode}")
        raise RuntimeError(reason)


# --------------------------------------------------------------------------- worker side
def _emit(**msg) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def lower_priority(priority: str = "idle") -> str:
    """Put this process (and the threads it starts later: Numba's, BLAS's) below the server:
    ``"idle"``: ``SCHED_IDLE`` on Linux (runs only on a core nobody else wants; a waking
    server thread preempts it at once), ``nice`` +``NICE`` elsewhere; ``"nice"``: ``nice``
    +``NICE`` (:func:`choose_priority` says when). Returns what was set."""
    if priority == "idle":
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return "SCHED_IDLE"
        except (AttributeError, OSError):
            pass
    try:
        os.nice(NICE)
        return f"nice +{NICE}"
    except OSError:
        return "normal"


def worker_main(argv: list[str]) -> int:
    tmp = Path(argv[0])
    lower_priority(os.environ.get("BGPLVM_TRAIN_PRIORITY", "idle"))
    job = json.loads((tmp / "job.json").read_text())
    stop = threading.Event()

    def read_stdin():
        for line in sys.stdin:
            if line.strip() == "stop":
                stop.set()
                return
        stop.set()  # parent went away: stop too

    threading.Thread(target=read_stdin, daemon=True).start()
    from bgplvm import BayesianGPLVM, DynamicalGPLVM

    with np.load(tmp / "data.npz", allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    cfg = job["config"]
    if job["dynamical"]:
        m = DynamicalGPLVM(data["Y"], data["t"], sequences=data["sequences"], time_kernel=job["time_kernel"], **cfg)
    else:
        m = BayesianGPLVM(data["Y"], **cfg)
    _emit(event="started", pid=os.getpid())

    def callback(p):
        _emit(event="iteration", iteration=int(p.iteration), bound=float(p.bound), phase=str(p.phase))
        return stop.is_set()

    m.fit(max_iters=int(job["max_iters"]), callback=callback, progress=False)
    m.metadata = dict(m.metadata or {}, dataset=job.get("dataset"))
    m.save(tmp / "model.npz")
    _emit(event="done", bound=float(m.elbo()))
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
