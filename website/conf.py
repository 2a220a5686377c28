"""Sphinx configuration of the series' website (``python tools/build_site.py``).

The site is built from the committed executed notebooks, never executing them: the chapters as the H200 run left
them, the README as the front page, METHODS and RESULTS. Sources are the repository's own files (this folder holds
only the configuration and the site's own static files); the build goes to ``build/site/`` (ignored by git).
"""
import re
import sys
from importlib.metadata import distribution
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = re.search(r"colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)/blob/(\w+)/",
                       (ROOT / "README.md").read_text())

project = "Making a small language model slower on purpose"
author = "the series' authors"
root_doc = "README"
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAGES = [*(f"notebooks/{c}" for c in CHAPTERS), "METHODS", "RESULTS", "DEVELOPING"]  # after the front page
series_pages = PAGES
include_patterns = ["README.md", *(f"{page}.{'ipynb' if page.startswith('notebooks/') else 'md'}" for page in PAGES)]
exclude_patterns = ["build", "runs", ".*"]

sys.path.insert(0, str(Path(__file__).parent / "_ext"))
extensions = ["myst_nb", "series_site"]
nb_execution_mode = "off"  # the committed outputs of the H200 run, as they are
nb_merge_streams = True
nb_ipywidgets_js = {}  # no widget manager from a CDN: the chapters' progress bars are plain text here
myst_enable_extensions = ["dollarmath"]  # $T$ and $$...$$, as Jupyter and Colab render them
myst_heading_anchors = 3  # "01_setup.ipynb#How-we-measure" reaches a chapter's heading from another page

myst_heading_slug_func = "series_site.jupyter_slug"  # the heading anchors Jupyter writes
suppress_warnings = ["myst.header"]  # a chapter's first heading is its title (# Chapter N: ...), then ## sections

html_theme = "sphinx_book_theme"
html_title = project
html_context = {"default_mode": "light"}  # the theme logs an error for an unset mode in a fresh browser
html_theme_options = {
    "repository_url": f"https://github.com/{REPOSITORY.group(1)}",
    "repository_branch": REPOSITORY.group(2),
    "path_to_docs": "",
    "use_repository_button": True,
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    "show_toc_level": 2,
}
# MathJax from the sphinx-mathjax-offline package, served by the site itself: math renders with no network. (Its
# import name has hyphens, so it cannot be loaded as an extension; its files are used directly, as it would.)
html_static_path = [str(distribution("sphinx-mathjax-offline").locate_file("sphinx-mathjax-offline/static")), "_static"]
html_css_files = ["series.css"]  # wide tables scroll, long inline code wraps
mathjax_path = "mathjax/tex-chtml.js"
html_last_updated_fmt = None
html_copy_source = False

