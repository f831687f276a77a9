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
napoleon_use_ivar = False

# HTML: Sphinx's built-in alabaster theme
html_theme = "alabaster"
html_title = f"bgplvm {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "description": "Bayesian GP-LVM, Numba-accelerated, with a latent-space explorer",
    "page_width": "1260px",
    "sidebar_width": "240px",
    "fixed_sidebar": True,
    "show_relbars": True,
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
html_show_sourcelink = False
pygments_style = "friendly"


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn's generated metadata-routing setters (set_fit_request, ...): their
    # docstrings refer to scikit-learn's own glossary and user guide
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None




def _signature(app, what, name, obj, options, signature, return_annotation):
    # the models' __new__(cls, *args, client=None, chunks=None, **kwargs) (it returns the
    # distributed model for client=) hides their parameters: show __init__'s, plus those two
    import inspect

    if what != "class" or not signature or not signature.startswith("(*args"):
        return None
    try:
        sig = inspect.signature(obj.__init__)
    except (TypeError, ValueError):
        return None
    params = [p.replace(annotation=inspect.Parameter.empty)
              for p in list(sig.parameters.values())[1:] if not p.name.startswith("_")]
    new = inspect.signature(obj.__new__).parameters
    names = {p.name for p in params}
    extra = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=inspect.Parameter.empty) for p in new.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in names]
    if extra and not any(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params):
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            extra = []
    try:
        text = str(sig.replace(parameters=params + extra, return_annotation=inspect.Signature.empty))
    except ValueError:
        text = str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))
    return text, None


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("autodoc-process-signature", _signature)
