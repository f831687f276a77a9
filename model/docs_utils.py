"""Helpers for the executable documentation (the user guide's notebooks).

``reduce_in_tests(n)`` is what a guide page writes for an iteration count: ``n`` when a
person runs the page, a small number when the documentation is built by the test suite or
CI (the environment variable ``BGPLVM_DOCS_QUICK`` set to anything but ``""`` / ``"0"``),
so that every example still runs end to end but in seconds. The same idea as GPflow's
``gpflow.ci_utils.reduce_in_tests``.
"""

from __future__ import annotations

import os

#: the environment variable that asks for the quick setting
QUICK_ENV = "BGPLVM_DOCS_QUICK"


def is_quick() -> bool:
    """True when ``$BGPLVM_DOCS_QUICK`` asks for the quick setting (set, and not "" or "0")."""
    return os.environ.get(QUICK_ENV, "") not in ("", "0")


def reduce_in_tests(n: int, test_n: int = 2) -> int:
    """The number of iterations (or samples, restarts, ...) a documentation example uses.

    Parameters
    ----------
    n : int
        The number a reader running the example should use.
    test_n : int, default 2
        The number used under the quick setting (``$BGPLVM_DOCS_QUICK`` set, as the docs
        test and CI do); never more than ``n``.

    Returns
    -------
    int
        ``min(n, test_n)`` under the quick setting, else ``n``.

    Examples
    --------
    >>> from bgplvm.docs_utils import reduce_in_tests
    >>> m.fit(max_iters=reduce_in_tests(3000, test_n=100))  # doctest: +SKIP
    """
    return min(int(n), int(test_n)) if is_quick() else int(n)
