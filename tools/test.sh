#!/usr/bin/env bash
# The test command (CI runs exactly this, through .ci/run):
#   bash tools/test.sh                  # install what is missing, then every check
#   bash tools/test.sh --keep-outputs   # also store the executed notebooks in notebooks/*.ipynb
# Checks: kernels against float64/fp32 references, the harness on a tiny Qwen3, the T4/H200 compile
# check, notebook pairing, the Colab setup path, the README, the workflows (actionlint), then every
# notebook under nbmake. Without a GPU (or with SLOWER_MODE=cpu) the notebooks run in CPU mode
# (Triton's interpreter); with a GPU the tests run on it and the notebooks run in quick mode.
# Results and figures go to runs/ (ignored by git): no tracked file changes, and the end checks that.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
NBMAKE_ARGS=()
for arg in "$@"; do
  case "$arg" in
    --keep-outputs) NBMAKE_ARGS+=(--overwrite) ;;
    *) echo "usage: bash tools/test.sh [--keep-outputs]" >&2; exit 2 ;;
  esac
done
# What git sees (file list and every tracked change), to check at the end that the tests left it alone.
snapshot() { git status --porcelain --untracked-files=all 2>/dev/null; git diff HEAD --binary 2>/dev/null | sha1sum; }
before=$(snapshot)

# install.py --test also puts nbmake's "python3" kernel, for this very Python, under build/ (the user's own
# Jupyter kernels are left alone)
"$PY" tools/install.py --test
export JUPYTER_PATH="$PWD/build/jupyter/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
if [ -z "${SLOWER_MODE:-}" ]; then
  SLOWER_MODE=$("$PY" -c "import torch; print('quick' if torch.cuda.is_available() else 'cpu')")
fi
export SLOWER_MODE
echo "test command: SLOWER_MODE=$SLOWER_MODE ($("$PY" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"))"
"$PY" -c "import importlib.metadata as m, platform; print('versions: Python', platform.python_version(), *(f'{n} {m.version(n)}' for n in ('torch', 'triton', 'transformers', 'numpy', 'kernels') if n in {d.lower() for ds in m.packages_distributions().values() for d in ds}))"

# The unit tests in parallel where pytest-xdist is installed (they check correctness, never speed).
XDIST=(); if "$PY" -c "import xdist" 2>/dev/null; then XDIST=(-n auto); fi
"$PY" -m pytest -q -p no:cacheprovider "${XDIST[@]}" tests
"$PY" -m pytest -q -p no:cacheprovider --nbmake --nbmake-timeout=900 "${NBMAKE_ARGS[@]}" notebooks

after=$(snapshot)
if [ ${#NBMAKE_ARGS[@]} -eq 0 ] && [ "$before" != "$after" ]; then
  echo "FAILED: the test command changed the working tree (git status before and after differ):" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
