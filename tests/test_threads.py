"""How many threads a kernel call gets: other processes' CPU use (not this process's own)
and the Python threads of this process that call kernels at the same time."""

import threading

import pytest

from bgplvm import _numba_config as cfg


def _idle_cores(samples, n_cpus=2):
    ic = cfg._IdleCores()
    ic.n_cpus, ic.available = n_cpus, True
    it = iter(samples)
    ic._sample = lambda: next(it)
    return ic


def test_idle_cores_counts_other_processes_only(monkeypatch):
    monkeypatch.setattr(cfg.time, "monotonic", lambda: 1e9)  # every call takes a sample
    # (wall s, machine busy CPU s, this process's CPU s)
    ic = _idle_cores([(0.0, 0.0, 0.0), (0.2, 0.2, 0.0), (0.4, 0.6, 0.4), (0.6, 0.9, 0.5)])
    assert ic() == 2  # first sample: nothing to compare yet
    assert ic() == 1  # another process used a whole core
    assert ic() == 2  # all of the busy time was ours (our own worker threads)
    assert ic() == 1  # others used 1.0 core of the 1.5 busy


def test_idle_cores_keeps_one_core_and_caches_between_samples(monkeypatch):
    clock = iter([0.0, 0.05, 0.3, 0.3])
    monkeypatch.setattr(cfg.time, "monotonic", lambda: next(clock))
    ic = _idle_cores([(0.0, 0.0, 0.0), (0.3, 0.9, 0.0)])
    assert ic() == 2
    assert ic() == 2  # 0.05 s later: the cached value, no sample taken
    assert ic() == 1  # three cores' worth of others on two cores still leaves one thread


def test_two_calling_threads_share_the_idle_cores(monkeypatch):
    monkeypatch.setattr(cfg, "ADAPTIVE", True)
    monkeypatch.setattr(cfg, "PARALLEL", True)
    monkeypatch.setattr(cfg, "MAX_THREADS", 2)
    monkeypatch.setattr(cfg, "idle_cores", lambda: 2)
    monkeypatch.setattr(cfg, "calling_threads", cfg._CallingThreads())
    assert cfg.threads_for(1000) == 2  # alone: both cores
    seen = []
    other = threading.Thread(target=lambda: seen.append(cfg.threads_for(1000)))
    other.start()
    other.join()
    assert seen == [1]  # two threads called within the interval: one core each
    assert cfg.threads_for(cfg.MIN_PARALLEL_POINTS - 1) == 1


@pytest.mark.parametrize("n", [1, 10])
def test_few_points_run_on_one_thread(n):
    assert cfg.threads_for(n) == 1
