"""The results of a run: one table (results.csv) with one row per result id, each recorded beside the hardware, mode
and versions it was measured with; the catalogue of every id (data/catalogue.csv, with the blog's T4 figures);
and the tables that set a run beside the committed one and the blog's. Paths and mode come from env, read at
each call."""
from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from filelock import FileLock

from slower_harness import env
from slower_harness.stats import Ratio

MODEL = {"description": "no model loaded"}  # what load_model last loaded: recorded beside every result


def describe_model(description: str) -> None:
    """Say which model the results recorded from now on were measured with (``load_model`` calls this)."""
    MODEL["description"] = description


RESULT_COLUMNS = ["id", "value", "unit", "note", "low", "high", "verdict", "slug", "mode", "model", "gpu", "python",
                  "torch", "triton",
                  "transformers", "time"]


def results_path(slug_dir: Path | None = None) -> Path:
    return (slug_dir or env.RESULTS_DIR) / "results.csv"


def results(path: Path | None = None):
    """This run's results table (or another one's, given its path): one row per id."""
    path = Path(path) if path else results_path()
    if not path.exists():
        return pd.DataFrame(columns=RESULT_COLUMNS)
    table = pd.read_csv(path, dtype={"id": str, "unit": str, "note": str, "verdict": str}, keep_default_na=False,
                        na_values={"value": [""], "low": [""], "high": [""]})
    for column in RESULT_COLUMNS:  # tables written before a column existed
        if column not in table:
            table[column] = float("nan") if column in ("low", "high") else ""
    return table


def record(id: str, value, unit: str, note: str = "", spread: "Ratio | None" = None, verdict: str = "") -> None:
    """Store one measurement under ``id`` (a newer measurement replaces the older).

    ``id`` must be in the catalogue (``data/catalogue.csv``) with the same unit: one list of results.
    ``spread`` (a Ratio, or anything with ``low`` and ``high``) stores the quartiles beside the value, and
    ``verdict`` its words ("within noise", ...), so that chapter 8 carries every uncertainty along.
    """
    entry = catalogue_entry(id)
    if entry is None:
        raise ValueError(f"record: id {id!r} is not in {CATALOGUE_PATH.name}; add a row for it there first")
    if entry["unit"] != unit:
        raise ValueError(f"record: {id!r} is catalogued in {entry['unit']!r}, got unit {unit!r}")

    info = env.env_info()
    value = float("nan") if value is None else float(value)
    low, high = (float(spread.low), float(spread.high)) if spread is not None else (float("nan"), float("nan"))
    row = {"id": id, "value": value, "unit": unit, "note": note, "low": low, "high": high, "verdict": verdict,
           "slug": env.SLUG, "mode": env.MODE,
           "model": MODEL["description"], "gpu": info["gpu"], "python": info["python"], "torch": info["torch"],
           "triton": info["triton"], "transformers": info["transformers"],
           "time": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    env.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with _locked(env.RESULTS_DIR / ".results.lock"):  # two notebooks open on one machine may both record
        table = results()
        table = table[table["id"] != id]
        table = pd.concat([table, pd.DataFrame([row])], ignore_index=True) if len(table) else pd.DataFrame([row])
        write_csv_atomically(table[RESULT_COLUMNS], results_path())


def write_csv_atomically(df, path: Path) -> None:
    """Write ``df`` to ``path`` through a temporary file and a rename, so that a reader in another
    process (a notebook open beside a series run, say) sees the old table or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


def _locked(path: Path):
    """An exclusive lock on ``path``, for any OS (filelock comes with the model hub's client)."""
    return FileLock(str(path))


CATALOGUE_PATH = env.ROOT / "data" / "catalogue.csv"


def catalogue():
    """Every result id the series records, with its chapter, label, unit, headline flag and the blog's
    value (``data/catalogue.csv``, the one list). An id part in braces, ``context.{prompt}.ratio``, stands
    for any value."""
    return pd.read_csv(CATALOGUE_PATH, dtype=str, keep_default_na=False, comment="#")


def catalogue_entry(id: str) -> dict | None:
    """The catalogue row that ``id`` is an instance of, or None."""
    for row in catalogue().to_dict("records"):
        pattern = re.escape(row["id"])
        pattern = re.sub(r"\\\{[a-z_]+\\\}", r"[A-Za-z0-9_\\-]+", pattern)
        if re.fullmatch(pattern, id):
            return row
    return None


def blog_numbers():
    """The blog's T4 figures by result id (columns id, blog_value, unit, note; blanks where it gives none)."""
    table = catalogue()
    return table[["id", "blog_value", "unit", "blog_note"]].rename(columns={"blog_note": "note"})


def blog(id: str):
    """The blog's T4 figure for ``id``: a float, the post's text where it is a range, None where it gives none."""
    value = blog_numbers().set_index("id").loc[id, "blog_value"]
    if value == "":
        return None
    try:
        return float(value)
    except ValueError:
        return value


# A unit as a table shows it: a ratio's catalogue unit "x slower" would read "0.18 x slower" for a kernel 5.7x faster
UNIT_WORDS = {"x slower": "time ratio (above 1: slower)"}


def compare(ids=None):
    """Your value, the committed H200 value and the blog's T4 value, side by side, with the catalogue's label.

    ``ids``: None (everything measured or quoted), a prefix such as ``"rmsnorm."``, or a list of ids.
    """
    yours = results()[["id", "value", "unit"]].rename(columns={"value": "yours"})
    h200 = results(env.COMMITTED_DIR / "h200" / "results.csv")[["id", "value", "unit"]].rename(
        columns={"value": "h200", "unit": "h200_unit"})
    blog = blog_numbers()[["id", "blog_value", "unit"]].rename(columns={"blog_value": "blog_t4",
                                                                       "unit": "blog_unit"})
    table = yours.merge(h200, on="id", how="outer").merge(blog, on="id", how="outer")
    for other in ("h200_unit", "blog_unit"):  # yours first, then the H200 run's, then the blog's
        table["unit"] = table["unit"].where(table["unit"].notna() & (table["unit"] != ""), table[other])
    table = table.drop(columns=["h200_unit", "blog_unit"])
    if isinstance(ids, str):
        table = table[table["id"].str.startswith(ids)]
    elif ids is not None:
        order = {k: i for i, k in enumerate(ids)}
        table = table[table["id"].isin(order)].assign(_o=lambda t: t["id"].map(order)).sort_values("_o")
        table = table.drop(columns="_o")
    table = table[~table["id"].str.contains("{", regex=False)]  # catalogue patterns such as context.{prompt}.ratio
    table["blog_t4"] = table["blog_t4"].fillna("")
    table["label"] = [(catalogue_entry(i) or {}).get("label", "") for i in table["id"]]  # names the clock of a time
    table["unit"] = table["unit"].replace(UNIT_WORDS)
    return table[["id", "label", "yours", "h200", "blog_t4", "unit"]].reset_index(drop=True)


def _chapter_of_prefix() -> dict:
    """{"baseline": "01 setup", ...}: each id prefix and the chapter that records it, in chapter order
    (from the catalogue; the lessons chapter's own re-measurements and run times left out)."""
    out = {}
    for row in catalogue().sort_values("chapter", kind="stable").to_dict("records"):
        prefix = row["id"].split(".")[0]
        if row["chapter"][:2].isdigit() and prefix not in ("lessons", "runtime"):
            out.setdefault(prefix, row["chapter"].replace("_", " "))
    return out


CHAPTER_OF_PREFIX = _chapter_of_prefix()


def summary_table():
    """Every experiment in chapter order: yours, the committed H200 run and the blog's T4 figure."""
    table = compare()
    prefix = table["id"].str.split(".").str[0]
    table = table[prefix.isin(list(CHAPTER_OF_PREFIX))].copy()
    order = {p: i for i, p in enumerate(CHAPTER_OF_PREFIX)}
    table.insert(0, "chapter", table["id"].str.split(".").str[0].map(CHAPTER_OF_PREFIX))
    table["_o"] = table["id"].str.split(".").str[0].map(order)
    return table.sort_values(["_o"], kind="stable").drop(columns="_o").reset_index(drop=True)
