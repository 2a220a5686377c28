"""The website: it builds from the committed chapters with warnings as errors, and it works in a real browser.

The browser part drives a headless Chromium that the machine already has (Debian's ``chromium``, or Chrome) with
Playwright, over the built site served from localhost with every request to another host blocked, as a reader
with no network would see it: every page loads, every figure loads, every internal link resolves, each chapter
shows its title and a Colab link, and the console shows no error but those blocked requests. It saves a
screenshot of the front page and of one chapter under runs/site/ for a person to look at. Skipped, with the
reason, where Sphinx and MyST-NB (``requirements-site.txt``) or a Chromium are missing.
"""
from __future__ import annotations

import functools
import http.server
import importlib.util
import re
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_site  # noqa: E402

CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAGES = ["index.html", *(f"notebooks/{c}.html" for c in CHAPTERS), "METHODS.html", "RESULTS.html",
         "DEVELOPING.html"]
SHOTS = ROOT / "runs" / "site"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

needs_sphinx = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("sphinx", "myst_nb", "sphinx_book_theme")),
    reason="the site needs Sphinx, MyST-NB and the book theme: pip install -r requirements-site.txt")


def chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return build_site.build(tmp_path_factory.mktemp("site") / "html")


@needs_sphinx
def test_the_site_has_every_page_and_its_math_needs_no_network(site):
    for page in PAGES:
        assert (site / page).is_file(), page
    chapter = (site / "notebooks" / f"{CHAPTERS[0]}.html").read_text()
    assert "mathjax/tex-chtml.js" in chapter and "cdn.jsdelivr.net/npm/mathjax" not in chapter
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()


@needs_sphinx
def test_a_link_that_does_not_resolve_fails_the_build(tmp_path, monkeypatch):
    """Warnings are errors: a chapter linking to a heading that no longer exists stops the build."""
    copy = tmp_path / "repo"  # what the site reads: its configuration, the pages, the chapters
    shutil.copytree(ROOT / "website", copy / "website", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks", copy / "notebooks", ignore=shutil.ignore_patterns("*.py", ".*"))
    shutil.copytree(ROOT / "figures", copy / "figures")
    for page in ROOT.glob("*.md"):
        shutil.copyfile(page, copy / page.name)
    monkeypatch.setattr(build_site, "ROOT", copy)
    build_site.build(tmp_path / "before")  # the copy builds as it is
    notebook = copy / "notebooks" / f"{CHAPTERS[4]}.ipynb"
    text = notebook.read_text()
    assert "01_setup.ipynb#How-we-measure" in text
    notebook.write_text(text.replace("01_setup.ipynb#How-we-measure", "01_setup.ipynb#How-we-measured", 1))
    with pytest.raises(build_site.subprocess.CalledProcessError):
        build_site.build(tmp_path / "html")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):  # the browser moved on before a page finished loading
            pass


@pytest.fixture(scope="module")
def served(site):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@needs_sphinx
@pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="the browser test needs playwright "
                    "(pip install -r requirements-site.txt)")
@pytest.mark.skipif(chromium() is None, reason="the browser test needs a Chromium on the PATH (Debian: apt install "
                    "chromium); playwright downloads none here")
def test_the_site_in_a_real_browser(site, served):
    from playwright.sync_api import sync_playwright

    base = urlparse(served).netloc
    blocked, errors, broken = [], [], []
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})

        def route(r):  # a reader with no network: only the site itself answers
            if urlparse(r.request.url).netloc == base or r.request.url.startswith("data:"):
                r.continue_()
            else:
                blocked.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("console", lambda m: errors.append((page.url, m.text)) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append((page.url, str(e))))
        links = set()
        for name in PAGES:
            response = page.goto(served + name, wait_until="load")
            assert response and response.ok, f"{name}: HTTP {response and response.status}"
            page.wait_for_load_state("networkidle")
            sizes = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.currentSrc, i.naturalWidth])")
            broken += [(name, src) for src, width in sizes if width == 0 and urlparse(src).netloc == base]
            hrefs = page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)")
            links |= {(name, h) for h in hrefs if urlparse(h).netloc == base}
            if name.startswith("notebooks/"):
                number = int(Path(name).stem[:2])
                assert re.match(rf"Chapter {number}\b", page.title()), f"{name}: title {page.title()!r}"
                assert page.locator(f'a[href*="colab.research.google.com"][href$="{Path(name).stem}.ipynb"]').count(), \
                    f"{name}: no Colab link to its notebook"
            if name in ("index.html", f"notebooks/{CHAPTERS[4]}.html"):
                page.screenshot(path=str(SHOTS / f"{Path(name).stem}.png"))
        assert not broken, f"figures that did not load: {broken}"
        unresolved, anchors = [], {}
        for name, href in links:  # every internal link: its page answers, and its anchor is on it
            url, anchor = urldefrag(href)
            anchors.setdefault(url, set()).add((name, href, anchor))
        for url, wanted in sorted(anchors.items()):
            response = page.goto(url, wait_until="domcontentloaded")
            if not (response and response.ok):
                unresolved += [(name, href, response and response.status) for name, href, _ in wanted]
                continue
            ids = set(page.eval_on_selector_all("[id]", "es => es.map(e => e.id)"))
            unresolved += [(name, href, "no such anchor") for name, href, anchor in wanted
                           if anchor and unquote(anchor) not in ids]
        browser.close()
    assert not unresolved, f"internal links that do not resolve: {unresolved[:10]}"
    outside = [(u, t) for u, t in errors if not ("ERR_FAILED" in t or "net::" in t)]
    assert not outside, f"console errors: {outside[:10]}"
