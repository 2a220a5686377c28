#!/usr/bin/env bash
# The committed H200 run, on this project's offline GPU machine (no network there: the Jupyter
# wheels travel in .whl/, fetched beforehand with ../shared/tools/device-wheels.sh).
#   bash tools/h200_run.sh tests             # the test suite on the GPU
#   bash tools/h200_run.sh series 01 02 03   # those chapters, full size, outputs written
# Logs and a tarball of figures/<slug>/ and the executed notebooks land in $OUT (default ./build/out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/out}; mkdir -p "$OUT"
[ -d "$HOME/site/nbmake" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --target "$HOME/site" .whl/*.whl || exit 1
export PYTHONPATH=$HOME/site:${PYTHONPATH:-} PATH=$HOME/site/bin:$PATH JUPYTER_PATH=$HOME/site/share/jupyter
python3 -m ipykernel install --prefix "$HOME/site" --name python3 >/dev/null
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step=$1; shift
status=0
case "$step" in
  tests)  python3 -m pytest -q -p no:cacheprovider $(python3 -c "import xdist" 2>/dev/null && printf '%s' '-n 8') tests "$@" 2>&1 | tee "$OUT/tests.log"; status=${PIPESTATUS[0]} ;;
  series) python3 tools/run_series.py --write-outputs --only "$@" 2>&1 | tee "$OUT/series.log"; status=${PIPESTATUS[0]} ;;
  *) echo "unknown step $step"; exit 2 ;;
esac
tar czf "$OUT/results.tgz" figures notebooks/*.ipynb 2>/dev/null
exit "$status"
