#!/usr/bin/env bash
# The test command: install what is missing, then run every check.
#   kernels and helpers (tests/), the T4/H200 compile check, the notebook pairing check,
#   the Colab setup path, the README-vs-results check, and all eight notebooks in CPU mode (nbmake).
# On a machine without torch (CI, a fresh laptop) it installs the pinned CPU stack from constraints-ci.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${CI:-}" = "true" ] || ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install --quiet --disable-pip-version-check -r requirements-test.txt -c constraints-ci.txt
else
  "$PY" -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
fi
"$PY" -m ipykernel install --user --name python3 >/dev/null  # nbmake needs a "python3" kernel
"$PY" -m pytest -q -p no:cacheprovider tests
SLOWER_MODE=cpu "$PY" -m pytest -q -p no:cacheprovider --nbmake --nbmake-timeout=900 notebooks
