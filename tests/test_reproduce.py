"""tools/reproduce.py: the same measurement in several fresh processes, and the spread between them."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import reproduce  # noqa: E402


def table(yours: float, committed: float = 2.0) -> pd.DataFrame:
    return pd.DataFrame([{"id": "full.slowdown", "what": "time ratio", "clock": "wall", "yours": yours,
                          "committed": committed, "deviation %": 100 * (yours / committed - 1)}])


def test_processes_combine_into_the_median_with_their_range():
    row = reproduce.combine([table(2.0), table(2.5), table(2.1)], bar=0.10).iloc[0]
    assert row["yours"] == pytest.approx(2.1) and row["between processes"] == "2.000-2.500"
    assert row["deviation %"] == pytest.approx(5.0) and row["within 10%"] == "yes"
    assert row["processes within"] == "2 of 3" and row["processes"] == 3
    assert reproduce.combine([table(2.5), table(2.4)], bar=0.10).iloc[0]["within 10%"] == "no"


def test_two_processes_run_one_after_another(tmp_path):
    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "add.ratio", "value": 1.0, "unit": "x slower"}]).to_csv(committed, index=False)
    done = subprocess.run([sys.executable, "tools/reproduce.py", "--processes", "2", "--ids", "add.ratio",
                           "--against", str(committed)], cwd=ROOT, capture_output=True, text=True,
                          env={**__import__("os").environ, "SLOWER_RESULTS_ROOT": str(tmp_path / "runs")})
    assert done.returncode == 0, done.stderr[-2000:]
    written = pd.read_csv(next((tmp_path / "runs").rglob("reproduce.csv")))
    assert list(written["id"]) == ["add.ratio"] and written["processes"].tolist() == [2]


def test_processes_must_be_positive():
    done = subprocess.run([sys.executable, "tools/reproduce.py", "--processes", "0"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "--processes must be at least 1" in done.stderr
