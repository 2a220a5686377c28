"""What a reader sees: tables (show), progress bars, markdown in a notebook, figures and sweeps saved beside
the results, and plain tick labels for log axes. It shows numbers; it does not write the chapters' sentences."""
from __future__ import annotations

from slower_harness import env  # first: it picks matplotlib's backend

import math
import os
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from matplotlib import ticker
from tqdm.auto import tqdm

from slower_harness.formats import plain_number, table_number


def launch_note(per: str = "decoded token") -> str:
    """What a launch count in results.csv counts: every CUDA kernel on a GPU (a call's from a CUDA graph of it,
    ``launches_per_call``; a token's from torch.profiler, ``profile_configs``), our own kernels in
    CPU mode."""
    if env.HAS_GPU:
        return f"every CUDA kernel per {per} ({'a CUDA graph of one call' if per == 'call' else 'torch.profiler'})"
    return f"CPU mode: our Triton kernels per {per} only (no CUDA kernels to count)"


def md(text: str) -> None:
    """Markdown in a notebook, plain text elsewhere."""
    if env.IN_NOTEBOOK:
        from IPython.display import Markdown, display

        display(Markdown(text))
    else:
        print(text)


def show(df) -> None:
    """A table, every row and column of it (pandas would elide the middle of a long one), its floats
    written by ``table_number`` (no "1655.000000", no "NaN")."""
    if isinstance(df, pd.DataFrame):
        df = df.copy()
        for column in df.columns:
            if pd.api.types.is_float_dtype(df[column]):
                df[column] = df[column].map(table_number)
            elif df[column].dtype == object:
                df[column] = df[column].map(lambda v: table_number(v) if isinstance(v, float) else v)
    if env.IN_NOTEBOOK:
        from IPython.display import display

        with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 200,
                               "display.max_colwidth", None):  # a label cut at 50 characters can lose its clock
            display(df)
    else:
        with pd.option_context("display.max_colwidth", None):
            print(df.to_string())


def progress(iterable, desc: str = "", **kwargs):
    """A progress bar (a widget in Jupyter). ``TQDM_DISABLE=1`` hides it: a stored notebook keeps a widget's
    first state ("0%"), and tqdm's notebook bar ignores that variable unless it is passed on."""
    kwargs.setdefault("disable", os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true"))
    return tqdm(iterable, desc=desc, **kwargs)


def save_figure(fig, name: str) -> Path:
    """Save to env.RESULTS_DIR/<name>.png: the same file name on every run."""
    env.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = env.RESULTS_DIR / f"{name}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def save_sweep(df, name: str) -> Path:
    """Save a sweep's table as env.RESULTS_DIR/<name>.csv, beside its figure."""
    env.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = env.RESULTS_DIR / f"{name}.csv"
    df.to_csv(path, index=False)
    return path


def plain_log_ticks(ax, axis: str = "both", values=None, labels=None) -> None:
    """Plain tick labels on a log axis of ``ax`` (``"x"``, ``"y"`` or ``"both"``): 128, 256, 0.05, never 6x10^1.

    ``values``: put the ticks exactly there (a sweep's own points), labelled as plain numbers or with
    ``labels``; no minor ticks. Without ``values``: ticks at 1, 2 and 5 times each power of ten in view (1, 2,
    3 and 5 on an axis shorter than 1.2 decades; powers of ten alone, as 10^k, on one longer than four decades
    or beyond 1e-4..1e5), unlabelled minor ticks between.
    A symlog axis keeps its ticks and only gets the plain labels.
    """
    class _Plain(ticker.Formatter):
        def __call__(self, x, pos=None):
            return plain_number(x, pos, self.axis.get_view_interval() if self.axis is not None else None)

    class _OneTwoFive(ticker.LogLocator):
        def tick_values(self, vmin, vmax):
            lo, hi = sorted((vmin, vmax))
            decades = math.log10(hi / lo) if lo > 0 else 0.0
            if lo > 0 and (decades > 4 or lo < 1e-4 or hi >= 1e5):  # powers of ten only, labelled 10^k
                subs = (1.0,)
            else:
                subs = (1.0, 2.0, 3.0, 5.0) if decades < 1.2 else (1.0, 2.0, 5.0)
            self.set_params(subs=subs)
            return super().tick_values(vmin, vmax)

    for which in (("x", "y") if axis == "both" else (axis,)):
        target = ax.xaxis if which == "x" else ax.yaxis
        scale = ax.get_xscale() if which == "x" else ax.get_yscale()
        if scale not in ("log", "symlog"):
            continue
        if values is not None:
            ticks = [float(v) for v in values]
            target.set_major_locator(ticker.FixedLocator(ticks))
            target.set_minor_locator(ticker.NullLocator())
            if labels is not None:
                target.set_major_formatter(ticker.FixedFormatter(list(labels)))
            else:
                target.set_major_formatter(_Plain())
            continue
        if scale == "log":
            target.set_major_locator(_OneTwoFive(base=10))
            target.set_minor_locator(ticker.LogLocator(base=10, subs=tuple(range(2, 10))))
        target.set_major_formatter(_Plain())
        target.set_minor_formatter(ticker.NullFormatter())


@contextmanager
def generation_progress(model, total: int | None = None, desc: str = "generating"):
    """A progress bar that advances once per forward pass of ``model`` (one per generated token) while the
    ``with`` block runs: for single measurements that take minutes. The block's work is unchanged; the hook
    adds one counter update, microseconds, to each forward pass."""
    # no rate in the bar: forwards per second under a progress hook is not a clock the series reports
    bar = progress(None, desc=desc, total=total, unit="forward", mininterval=1.0,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}]")

    def advance(_module, _args, _output):
        bar.update()  # returns nothing: a forward hook that returns a value replaces the model's output

    handle = model.register_forward_hook(advance)
    try:
        yield bar
    finally:
        handle.remove()
        bar.close()
