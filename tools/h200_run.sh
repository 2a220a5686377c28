#!/usr/bin/env bash
# The committed H200 run, on this project's offline GPU machine (no network there: the Jupyter
# wheels travel in .whl/, fetched beforehand with ../shared/tools/device-wheels.sh).
#   bash tools/h200_run.sh tests             # the test suite on the GPU
#   bash tools/h200_run.sh series 01 02 03   # those chapters, full size, outputs written
#   bash tools/h200_run.sh split "01 02 03 04 05" "06"
#                                            # two groups side by side, one GPU each (nvidia-h200-x2),
#                                            # each stopped after GROUP_TIMEOUT seconds (default 560) so
#                                            # that the tarball is always written; chapter 8 reads every
#                                            # result, so it runs after both
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
  split)  # results.csv is written under a file lock and replaced atomically, so the groups can share it
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
    if [ $# -lt 1 ] || [ $# -gt "$gpus" ]; then
      echo "split: $# groups for $gpus GPUs (a group without a GPU would run in CPU mode)"; exit 2
    fi
    rm -f "$OUT"/series_gpu*.log
    gpu=0; pids=()
    for group in "$@"; do
      # shellcheck disable=SC2086  # a group is a space-separated list of chapters
      CUDA_VISIBLE_DEVICES=$gpu timeout "${GROUP_TIMEOUT:-560}" python3 tools/run_series.py --write-outputs \
        --only $group >"$OUT/series_gpu$gpu.log" 2>&1 &
      pids+=($!); gpu=$((gpu + 1))
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    cat "$OUT"/series_gpu*.log | tr '\r' '\n' | grep -E '^[0-9]{2}_[a-z_]+: [0-9]+ s|FAILED' ;;
  *) echo "unknown step $step"; exit 2 ;;
esac
tar czf "$OUT/results.tgz" figures notebooks/*.ipynb 2>/dev/null
exit "$status"
