"""Training off the server: one fit per worker process, at lower priority, few threads.

The explorer serves every session from one Python process. A fit run inside it (even in
a thread) holds the interpreter between Numba calls and its Numba/BLAS threads take the
cores the sessions need, so everybody's mouse moves slow down. Here a fit runs in its own
process:

* below everything else (``SCHED_IDLE`` on Linux, else ``nice`` +``NICE``: the kernel
  schedules the server and the browsers first), and with ``NUMBA_NUM_THREADS`` / BLAS
  threads capped at ``BGPLVM_TRAIN_THREADS`` (default 1);
* at most ``BGPLVM_MAX_TRAINERS`` (default: half the cores, at least 1) run at once per
  server; later jobs wait in a queue and say so;
* the job and the model travel as files in a private temporary directory (the data as
  .npz, the model as a bgplvm model file, never pickle); progress comes back as one JSON
  line per optimiser iteration on the worker's stdout; "stop" on its stdin ends the fit at
  the current iteration and the best point so far is saved.

``python -m explorer.train_worker DIR`` is the worker's entry point.
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


def worker_env(threads: int | None = None) -> dict:
    """Environment of a worker: capped Numba, OpenMP and BLAS threads."""
    n = str(threads or train_threads())
    env = dict(os.environ)
    env.update(NUMBA_NUM_THREADS=n, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n,
               PYTHONUNBUFFERED="1")
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
        from model import BayesianGPLVM

        err = open(tmp / "stderr.txt", "wb")
        try:
            self._proc = proc = subprocess.Popen(
                [sys.executable, "-m", "explorer.train_worker", str(tmp)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, env=worker_env())
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


def lower_priority() -> str:
    """Put this process (and the threads it starts later: Numba's, BLAS's) below everything
    else: ``SCHED_IDLE`` on Linux, so a core runs the fit only when no session wants it and
    a waking server thread preempts it at once; elsewhere ``nice`` +``NICE``. Returns which."""
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
    lower_priority()
    job = json.loads((tmp / "job.json").read_text())
    stop = threading.Event()

    def read_stdin():
        for line in sys.stdin:
            if line.strip() == "stop":
                stop.set()
                return
        stop.set()  # parent went away: stop too

    threading.Thread(target=read_stdin, daemon=True).start()
    from model import BayesianGPLVM, DynamicalGPLVM

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
