"""slower_harness.results: one results table per run, the catalogue of result ids, the blog's figures beside ours."""
import re
import sys

import pandas as pd
import pytest
import torch

from slower_harness import env, results


def test_record_overwrites_by_id_and_joins_the_blog(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "RESULTS_DIR", tmp_path / "figures" / "x")
    results.record("add.ratio", 2.0, "x slower")
    results.record("add.triton_ms", 0.5, "ms", note="2^20 elements")
    results.record("add.ratio", 1.5, "x slower")
    table = results.results()
    assert list(table["id"]) == ["add.triton_ms", "add.ratio"]
    assert table.set_index("id").loc["add.ratio", "value"] == 1.5
    assert set(results.RESULT_COLUMNS) <= set(table.columns)
    row = table.set_index("id").loc["add.triton_ms"]
    assert row["mode"] == env.MODE and row["torch"] == torch.__version__ and row["note"] == "2^20 elements"
    both = results.compare("add.").set_index("id")
    assert both.loc["add.ratio", "yours"] == 1.5 and both.loc["add.ratio", "blog_t4"] == "1.81"
    assert both.loc["add.torch_ms", "blog_t4"] == "0.046" and pd.isna(both.loc["add.torch_ms", "yours"])


def test_blog_numbers_are_the_seed_copy():
    blog = results.blog_numbers().set_index("id")
    assert blog.loc["full.slowdown", "blog_value"] == "3.59"
    assert blog.loc["baseline.tps_kv", "blog_value"] == ""  # the post gives none


def test_blog_values_by_id():
    assert results.blog("add.ratio") == 1.81
    assert results.blog("context.ratio_range") == "3.2-3.9"  # a range stays as the post wrote it
    assert results.blog("baseline.tps_kv") is None


# --- The catalogue ------------------------------------------------------------------------------
def recorded_ids() -> set:
    """Every id the chapters and tools record (f-string parts kept as written, e.g. ``context.{L}.ratio``)."""
    ids = set()
    for path in [*(env.ROOT / "notebooks").glob("[0-9][0-9]_*.py"), *(env.ROOT / "tools").glob("*.py")]:
        text = path.read_text()
        ids.update(re.findall(r"helpers\.record\(\s*f?\"([^\"]+)\"", text))  # helpers.record("id", ...)
        # a Comparison's record(name, "id", ...)
        ids.update(re.findall(r"\.record\(\s*[^,()]+,\s*f?\"([^\"]+)\"", text))
    return ids


def _as_pattern(id_with_parts: str) -> str:
    """``context.{L}.ratio`` -> a regex in which each {part} stands for any id text (possibly empty)."""
    return re.sub(r"\\\{[^}]*\\\}", "[A-Za-z0-9_]*", re.escape(id_with_parts))


def test_every_recorded_id_is_catalogued_and_every_catalogued_id_is_recorded():
    table = results.catalogue()
    catalogued, blog_only = set(table["id"]), set(table.query("chapter == 'blog'")["id"])
    recorded = recorded_ids()
    assert recorded, "found no helpers.record calls: the scan is broken"

    def matches(a, b):  # one id, either side possibly with {parts}, can stand for the other
        return bool(re.fullmatch(_as_pattern(a), b.replace("{", "").replace("}", "")) or
                    re.fullmatch(_as_pattern(b), a.replace("{", "").replace("}", "")))

    uncatalogued = {r for r in recorded if not any(matches(r, c) for c in catalogued)}
    unrecorded = {c for c in catalogued - blog_only if not any(matches(r, c) for r in recorded)}
    assert not uncatalogued, f"recorded but not in data/catalogue.csv: {sorted(uncatalogued)}"
    assert not unrecorded, f"catalogued but recorded by no chapter: {sorted(unrecorded)}"


def test_record_refuses_an_uncatalogued_id_or_a_wrong_unit(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "RESULTS_DIR", tmp_path)
    with pytest.raises(ValueError, match="not in catalogue.csv"):
        results.record("add.made_up", 1.0, "ms")
    with pytest.raises(ValueError, match="catalogued in 'ms'"):
        results.record("add.triton_ms", 1.0, "s")
    results.record("context.77.ratio", 2.0, "x slower")  # an instance of context.{prompt}.ratio
    assert results.results(tmp_path / "results.csv").set_index("id").loc["context.77.ratio", "value"] == 2.0


def test_the_readme_headline_rows_come_from_the_catalogue():
    sys.path.insert(0, str(env.ROOT / "tools"))
    import make_readme

    headline = results.catalogue().query("headline == 'yes'")
    assert make_readme.headline_rows() == list(zip(headline["id"], headline["label"]))


def test_compare_words_a_ratio_s_unit_both_ways(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "RESULTS_DIR", tmp_path)
    results.record("add.ratio", 0.5, "x slower")
    row = results.compare(["add.ratio"]).iloc[0]
    assert row["unit"] == "time ratio (above 1: slower)" and row["yours"] == 0.5
