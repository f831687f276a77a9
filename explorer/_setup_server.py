"""Run by ``panel serve --setup`` once before the server accepts sessions."""

from bgplvm.explorer.probe import maybe_install
from bgplvm.explorer.warm import ensure_warm

maybe_install()  # only with BGPLVM_LATENCY_PROBE set (load tests)
ensure_warm()
