"""slower_harness.reproduce: the headline ratios measured again and set beside the committed run."""
import dataclasses

import pandas as pd
import pytest

import slower_kernels
from slower_harness import clocks, compare, decoders, env, reproduce, results, timing_order


def test_reproduce_sets_a_kernel_ratio_beside_the_committed_one(tmp_path):
    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "add.ratio", "value": 2.0, "unit": "x slower"}]).to_csv(committed, index=False)
    again = reproduce.reproduce(ids=["add.ratio"], committed=committed)
    low, high = again.attrs["quartile bounds"]["add.ratio"]  # unrounded, for inside/outside
    table = again.set_index("id")
    row = table.loc["add.ratio"]
    assert low <= row["yours"] <= high
    assert row["committed"] == 2.0 and row["yours"] > 0
    assert row["deviation %"] == pytest.approx(100 * (row["yours"] / 2.0 - 1))
    assert row["clock"] == clocks.CLOCK_LABELS["gpu" if env.HAS_GPU else "interpreter"]
    with pytest.raises(ValueError, match="cannot be reproduced"):
        reproduce.reproduce(ids=["add.made_up"])


def test_reproduce_times_kernel_ratios_only_before_a_profile(tmp_path, monkeypatch):
    catalogue = set(results.catalogue()["id"])
    assert all(set(key.split("/")) <= catalogue for key in reproduce.KERNEL_RATIO_IDS)
    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "add.ratio", "value": 1.0, "unit": "x slower"}]).to_csv(committed, index=False)
    monkeypatch.setattr(timing_order, "PROFILED_BY", ["step_timeline"])
    with pytest.raises(RuntimeError, match="step_timeline"):
        reproduce.reproduce(ids=["add.ratio"], committed=committed)


def test_reproduce_reads_a_comparison_the_caller_already_ran(tiny, tmp_path, monkeypatch):
    def fake_generate(model, ids, n, use_cache=True):
        return None, n * (4.0 if any(isinstance(m, slower_kernels.TritonRMSNorm) for m in model.modules()) else 1.0)

    monkeypatch.setattr(decoders, "generate", fake_generate)
    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "rmsnorm.tps_slowdown", "value": 5.0, "unit": "x slower"}]).to_csv(committed, index=False)
    comparison = compare.compare_configs(tiny, reproduce.reproduce_configs(["rmsnorm.tps_slowdown"]), prompt_len=4,
                                         new_tokens=3, rounds=2)
    row = reproduce.reproduce(tiny, ids=["rmsnorm.tps_slowdown"], committed=committed,
                              comparison=comparison).set_index("id").loc["rmsnorm.tps_slowdown"]
    assert row["yours"] == 4.0 and row["deviation %"] == pytest.approx(-20.0) and row["A/A floor"] == 1.0
    assert row["within 10%"] == "no"
    with pytest.raises(ValueError, match="has no"):
        reproduce.reproduce(tiny, ids=["full.slowdown"], committed=committed, comparison=comparison)


def test_reproduce_gives_the_small_effects_more_rounds(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(decoders, "generate", lambda model, ids, n, use_cache=True: (None, float(n)))
    monkeypatch.setattr(env, "SIZES", dataclasses.replace(env.SIZES, rounds=2, rounds_small=4))
    seen = []
    real_compare = compare.compare_configs
    monkeypatch.setattr(reproduce, "compare_configs", lambda model, configs, **kw: seen.append(
        (sorted(configs), kw["rounds"])) or real_compare(model, configs, prompt_len=4, new_tokens=2, **kw))
    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "rmsnorm.tps_slowdown", "value": 1.0, "unit": "x slower"},
                  {"id": "full.slowdown", "value": 1.0, "unit": "x slower"}]).to_csv(committed, index=False)
    table = reproduce.reproduce(tiny, ids=["rmsnorm.tps_slowdown", "full.slowdown"], committed=committed)
    assert reproduce.SMALL_EFFECTS == ("rmsnorm.tps_slowdown",)
    assert seen == [(["two-pass RMSNorm"], 4), (["all custom"], 2)]
    assert list(table["clock"]) == ["wall, 4 shuffled rounds", "wall, 2 shuffled rounds"]
    seen.clear()  # one round count for all (--rounds): one comparison
    reproduce.reproduce(tiny, ids=["rmsnorm.tps_slowdown", "full.slowdown"], committed=committed, rounds=2)
    assert seen == [(["all custom", "two-pass RMSNorm"], 2)]


def test_reproduced_ratios_are_catalogued_ratios():
    for rid in reproduce.REPRODUCE_CONFIGS:
        assert results.catalogue_entry(rid)["unit"] == "x slower", rid
