"""Run by ``panel serve --setup`` once before the server accepts sessions."""

from explorer.warm import ensure_warm

ensure_warm()
