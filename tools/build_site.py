"""Build the series' website from the committed executed chapters, without executing anything.

    python tools/build_site.py            # into build/site/ (ignored by git); open build/site/index.html
    python tools/build_site.py --out DIR  # somewhere else

Sphinx with MyST-NB and the book theme (``website/conf.py``; install them with ``pip install -r
requirements-site.txt``): the README as the front page, the chapters with their outputs and a Colab button,
METHODS, RESULTS and DEVELOPING, search, and math rendered by a MathJax the site serves itself, so that it reads
with no network. Warnings are errors: a link between chapters that does not resolve fails the build.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "build" / "site"


def build(out: Path = SITE, quiet: bool = True) -> Path:
    """Build the site into ``out`` (its doctrees beside it) and return ``out``; raises CalledProcessError on a
    warning. ``index.html`` is the front page (Sphinx names it after the README)."""
    out = Path(out)
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-c", str(ROOT / "website"),
               "-d", str(out.with_name(out.name + "-doctrees")), str(ROOT), str(out)]
    subprocess.run(command + (["-q"] if quiet else []), check=True)
    shutil.copyfile(out / "README.html", out / "index.html")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=SITE, help=f"where the site goes (default {SITE.relative_to(ROOT)})")
    args = parser.parse_args()
    try:
        out = build(args.out, quiet=False)
    except subprocess.CalledProcessError as error:
        print(f"the site did not build (sphinx exited {error.returncode}): see its warnings above", file=sys.stderr)
        return 1
    print(f"site: {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
