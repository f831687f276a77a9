"""What the reproductions need from the model package: a clear "not on this branch yet"
when an API a row uses is missing, the ARD count, and one BLAS thread.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np


class ApiMissing(RuntimeError):
    """A model API the row needs is not on this branch yet."""


def require(cls_name: str, *methods: str, issue: int, modules: tuple[str, ...] = ()):
    """The class ``bgplvm.<cls_name>`` if it has ``methods`` and the ``modules`` they use
    import; else raise ApiMissing (checked before any fitting, so no fit is wasted)."""
    import bgplvm

    cls = getattr(bgplvm, cls_name, None)
    missing = [m for m in methods if cls is None or not hasattr(cls, m)]
    if cls is None or missing:
        what = f"bgplvm.{cls_name}" + (f".{', .'.join(missing)}" if cls is not None else "")
        raise ApiMissing(f"{what} is not on this branch yet (issue {issue}): row not run")
    for mod in modules:
        try:
            importlib.import_module(mod)
        except ImportError:
            raise ApiMissing(f"{mod}, which bgplvm.{cls_name}.{methods[-1]} uses, is not on this "
                             f"branch yet (issue {issue}): row not run") from None
    return cls


def ard_kept(m) -> int | None:
    """Latent dimensions whose ARD weight is above the model summary's threshold."""
    from bgplvm.io import ACTIVE_FRACTION

    w = getattr(m, "ard_weights", None)
    if w is None:
        return None
    w = np.asarray(w, dtype=np.float64)
    return int(np.sum(w / w.max() > ACTIVE_FRACTION))


def one_blas_thread(fn):
    """Run an experiment with BLAS limited to one thread (threadpoolctl), the model's own
    policy (``bgplvm._threads``). Not every test-time path of the model enters that limit
    yet: ``DynamicalGPLVM.reconstruct`` ran LAPACK potri on 124 x 124 blocks with two
    OpenBLAS threads, ~30x slower (2.2 s against 0.07 s per bound) on a busy 2-core machine."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper


def progress_logger(ctx, label: str, every: int = 250):
    """A fit callback that logs the iteration, bound and elapsed time every ``every``
    iterations through ``ctx.log`` (long runs in the background stay observable)."""

    def callback(p) -> bool:
        if p.iteration % every == 0:
            ctx.log(f"{label}: iteration {p.iteration}/{p.max_iters} ({p.phase}), bound {p.bound:.6g}, "
                    f"{p.elapsed:.0f} s")
        return False

    return callback
