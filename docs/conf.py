"""Sphinx configuration of bgplvm's documentation (``bash scripts/docs.sh`` builds it).

The user guide (``guide/*.py``) is jupytext percent scripts executed at build time by the
local extension ``_ext/notebooks.py``; the API reference comes from the docstrings
(autodoc, numpy style through napoleon). Built with warnings as errors (``-W``); the build
needs no network (MathJax loads from its CDN when a page is viewed).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import bgplvm  # noqa: E402

project = "bgplvm"
author = "the bgplvm authors"
copyright = "the bgplvm authors, BSD-3-Clause"
release = version = bgplvm.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "notebooks",
]

exclude_patterns = ["_build", "_ext", "conf.py", "**/.ipynb_checkpoints", "**/__pycache__"]
root_doc = "index"
source_suffix = {".rst": "restructuredtext"}  # ".py" (guide pages) is added by the extension
notebooks_pattern = "guide/*.py"
notebooks_watch = ["../model", "../explorer", "../datasets"]

# API reference
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "show-inheritance": True}
autosummary_generate = False  # the reference pages are written by hand (no generated files in docs/)
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True

# HTML: Sphinx's built-in alabaster theme
html_theme = "alabaster"
html_title = f"bgplvm {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "description": "Bayesian GP-LVM, Numba-accelerated, with a latent-space explorer",
    "page_width": "1180px",
    "sidebar_width": "240px",
    "fixed_sidebar": True,
    "show_relbars": True,
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
html_show_sourcelink = False
pygments_style = "friendly"
