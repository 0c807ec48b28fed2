"""Sphinx configuration of the skdp documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html`` (warnings are
errors). The gallery (``examples/``) is executed during the build.
"""

import os

import skdp

project = "skdp"
author = "skdp developers"
copyright = "skdp developers, BSD-3-Clause"  # noqa: A001 (Sphinx's name)
release = skdp.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["custom.css"]
exclude_patterns = [
    "_build",
    # Files with a leading underscore are scratch output (for instance a
    # benchmark's raw table), not pages of the site.
    "_*.md",
    "_*.rst",
    "Thumbs.db",
    ".DS_Store",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.json",
    "auto_examples/*.md5",
    "auto_examples/*.codeobj.json",
]

# -- HTML -------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"skdp {release}"
html_theme_options = {
    "description": "Differential privacy inside scikit-learn",
    "fixed_sidebar": True,
    "page_width": "1100px",
    "sidebar_width": "240px",
}

# -- Markdown (MyST) ----------------------------------------------------------
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
# docs/benchmarks.md starts at a level-2 heading (it is written to be read on
# its own, as a report); that is the one MyST warning silenced here.
suppress_warnings = ["myst.header"]

# -- API reference ----------------------------------------------------------
autosummary_generate = True
autosummary_ignore_module_all = False  # document exactly each module's __all__
autodoc_default_options = {"members": False}
autodoc_typehints = "none"
autoclass_content = "class"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# numpydoc's optional style validation is off: ruff's pydocstyle rules (numpy
# convention) already check the docstrings, and -W fails on what cannot render.
numpydoc_validation_checks = set()


def _public_data():
    """Constants in each public module's ``__all__``, with their ``#:`` docs.

    Autosummary lists only the module attributes *defined* in a module, so a
    constant re-exported from a private submodule (``DEFAULT_ORDERS``) would
    have no entry. The module template documents these from this table; it
    is built from ``__all__`` so new public constants appear by themselves.
    """
    import importlib
    import inspect
    import sys

    from sphinx.pycode import ModuleAnalyzer

    table = {}
    for module_name in _API_MODULES:
        module = importlib.import_module(module_name)
        entries = []
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if inspect.isclass(value) or callable(value) or inspect.ismodule(value):
                continue
            doc = ""
            for other_name, other in sorted(sys.modules.items()):
                if not other_name.startswith(module_name) or other is None:
                    continue
                if getattr(other, name, None) is not value:
                    continue
                comments = ModuleAnalyzer.for_module(other_name).find_attr_docs()
                if ("", name) in comments:
                    doc = " ".join(line.strip() for line in comments[("", name)])
                    break
            if not doc:
                text = repr(value)
                doc = f"``{text}``" if len(text) <= 80 else ""
            entries.append((name, doc))
        table[module_name] = entries
    return table


_API_MODULES = (
    "skdp.accounting",
    "skdp.audit",
    "skdp.datasets",
    "skdp.exceptions",
    "skdp.fairness",
    "skdp.model_selection",
    "skdp.preprocessing",
    "skdp.synthetic",
)
autosummary_context = {"public_data": _public_data()}

# -- Gallery ------------------------------------------------------------------
_here = os.path.dirname(os.path.abspath(__file__))
sphinx_gallery_conf = {
    "examples_dirs": os.path.join(_here, "..", "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "plot_gallery": "True",
    # 0: every page states its running time (tests/test_docs.py reads it).
    "min_reported_time": 0,
    "write_computation_times": False,
    # Examples run in as many processes as sphinx-build -j gives (1 by default).
    "parallel": True,
    "within_subsection_order": "FileNameSortKey",
    # "Examples using X" on every API page.
    "doc_module": ("skdp",),
    "backreferences_dir": "gen_modules/backreferences",
    "reference_url": {"skdp": None},
}

# Examples draw with the non-interactive backend (no display on CI).
os.environ.setdefault("MPLBACKEND", "Agg")

