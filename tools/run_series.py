"""Run the whole series, in order, on whatever hardware is here.

    python tools/run_series.py                  # all chapters, one after another
    python tools/run_series.py --only 05 06     # some of them
    python tools/run_series.py --write-outputs  # store the outputs in notebooks/*.ipynb instead
    python tools/run_series.py --commit         # write figures/<gpu>/ (the committed run) instead of runs/

First it installs what is missing (tools/install.py: PyTorch and Triton too, a CPU build where there is
no GPU). Full size on a GPU, CPU mode (Triton's interpreter, a tiny model) otherwise; SLOWER_MODE=quick
or SLOWER_MODE=cpu ask for the other modes, and a GPU mode without a GPU is an error. Each chapter runs
under nbmake, as the tests do, one at a time: nothing else runs beside a measurement. Figures and
results go to runs/<gpu>/ (ignored by git), the executed chapters to runs/<gpu>/notebooks/ (open them in
Jupyter to read your own run), each chapter's wall time is recorded as runtime.<chapter>_s
and in runtimes.csv, and the run ends with the summary table of chapter 8. Chapter 8 sums up every other
chapter, so it runs last, after chapter 9. The first failing chapter
stops the run, with its name and error. No tracked file changes unless you ask: --commit writes the
figures and results under figures/ (as the committed H200 run was made), --write-outputs the notebooks.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
import install  # noqa: E402  (standard library and colab_setup only: safe before the installs)

NOTEBOOKS = ROOT / "notebooks"
SUMMARY = "08_lessons"  # reads every other chapter's results, chapter 9's too: it runs last


def in_order(chapters: list) -> list:
    """The chapters by number, the summary chapter last."""
    return sorted(chapters, key=lambda c: (c.stem == SUMMARY, c.stem))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="chapter numbers or names to run (default: all)")
    parser.add_argument("--write-outputs", action="store_true",
                        help="store outputs in notebooks/*.ipynb (default: the executed copies go to runs/<gpu>/notebooks/)")
    parser.add_argument("--commit", action="store_true",
                        help="write figures and results to figures/<gpu>/ (tracked) instead of runs/<gpu>/")
    parser.add_argument("--cell-timeout", type=int, default=3600, help="seconds one cell may take")
    args = parser.parse_args()

    subprocess.run([sys.executable, str(ROOT / "tools" / "install.py"), "--notebooks"], check=True)  # nbmake, its kernel
    if args.commit:
        os.environ["SLOWER_RESULTS_ROOT"] = str(ROOT / "figures")
    try:
        import helpers  # after the installs; settles the mode
    except RuntimeError as err:  # a GPU mode asked for without a GPU
        print(f"error: {err}", file=sys.stderr)
        return 2
    from tqdm.auto import tqdm

    chapters = in_order(list(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
    if args.only:
        chapters = [c for c in chapters if any(c.stem.startswith(o) or c.stem == o for o in args.only)]
        if not chapters:
            parser.error(f"no chapter matches {args.only}")
    helpers.show_env()
    executed = NOTEBOOKS if args.write_outputs else ROOT / "runs" / helpers.RESULTS_DIR.name / "notebooks"
    executed.mkdir(parents=True, exist_ok=True)
    print(f"results and figures go to {os.path.relpath(helpers.RESULTS_DIR, ROOT)}/, "
          f"the executed chapters to {os.path.relpath(executed, ROOT)}/")
    kernels = install.KERNELS / "share" / "jupyter"  # where install.py --notebooks put nbmake's kernel
    jupyter_path = os.pathsep.join(p for p in (str(kernels), os.environ.get("JUPYTER_PATH")) if p)
    env = dict(os.environ, SLOWER_MODE=helpers.MODE, SLOWER_RESULTS_ROOT=str(helpers.RESULTS_ROOT),
               JUPYTER_PATH=jupyter_path)
    if args.write_outputs:  # a stored notebook keeps a progress widget's first state ("0%"), not its last
        env["TQDM_DISABLE"] = "1"
    bar = tqdm(chapters, desc="series", unit="chapter")
    peaks = tempfile.TemporaryDirectory()
    for nb in bar:
        bar.set_postfix_str(nb.stem)
        if not args.write_outputs:  # a copy, executed in place of the tracked notebook (it finds the repository
            shutil.copyfile(nb, executed / nb.name)  # by walking up from its folder, as every chapter does)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbmake",
               f"--nbmake-timeout={args.cell_timeout}", "--overwrite", str((executed / nb.name).relative_to(ROOT))]
        peak = Path(peaks.name) / f"{nb.stem}.json"  # the chapter's kernel writes its peak memory here at exit
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=dict(env, SLOWER_PEAK_FILE=str(peak)), capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            bar.close()
            print(f"\nFAILED: {nb.stem} after {seconds:.0f} s\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}")
            return 1
        helpers.record(f"runtime.{nb.stem}_s", seconds, "s", note=f"{helpers.MODE} mode, nbmake")
        if peak.exists():  # written by the chapter's kernel as it shut down
            memory = json.loads(peak.read_text())
            if helpers.HAS_GPU:
                helpers.record(f"runtime.{nb.stem}_gpu_gib", memory["gpu_bytes"] / 2**30, "GiB",
                               note="peak reserved by PyTorch's allocator (the CUDA context comes on top)")
            helpers.record(f"runtime.{nb.stem}_host_gib", memory["host_bytes"] / 2**30, "GiB",
                           note="peak resident set of the chapter's kernel process")
        tqdm.write(f"{nb.stem}: {seconds:.0f} s")
    bar.close()
    runtimes = helpers.results()
    runtimes = runtimes[runtimes["id"].str.startswith("runtime.")]
    helpers.write_csv_atomically(runtimes[["id", "value", "unit", "gpu", "mode", "time"]],
                                 helpers.RESULTS_DIR / "runtimes.csv")
    print("\nSummary (yours beside the committed H200 run and the blog's T4 numbers):")
    with __import__("pandas").option_context("display.width", 160, "display.max_rows", 500):
        print(helpers.summary_table().to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
