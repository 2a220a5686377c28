"""slower_harness.env: where this run happens (mode, device, the GPU's short name, where results go, versions)."""
import os
import subprocess
import json
import sys
from pathlib import Path

import pytest

from slower_harness import env


def test_importing_the_harness_in_quick_mode_without_a_gpu_fails(tmp_path):
    """The real path: a GPU CI job whose GPU is missing must fail, not pass in CPU mode."""
    environ = dict(os.environ, SLOWER_MODE="quick", CUDA_VISIBLE_DEVICES="")  # hide any GPU
    done = subprocess.run([sys.executable, "-c", "import helpers"], cwd=env.ROOT, env=environ,  # as a chapter does
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "SLOWER_MODE=quick asks for a GPU" in done.stderr, done.stderr[-2000:]


def test_results_go_to_an_ignored_folder_unless_committing():
    probe = env.ROOT / "runs" / env.SLUG / "results.csv"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=env.ROOT)
    assert ignored.returncode == 0, f"{probe} is not ignored by git: a run would leave untracked files"


@pytest.mark.parametrize("name, slug", [("Tesla T4", "t4"), ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-80GB", "a100"),
                                        ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA L4", "l4"),
                                        ("NVIDIA GeForce RTX 4090", "rtx4090"), ("cpu", "cpu")])
def test_hardware_slug(name, slug):
    assert env.hardware_slug(name) == slug


def test_env_info_names_versions_and_mode():
    info = env.env_info()
    for key in ("gpu", "mode", "python", "torch", "triton", "transformers", "compute_capability", "memory_gib",
                "pinned"):
        assert key in info
    assert info["mode"] == env.MODE


def test_a_process_told_where_writes_its_peak_memory_at_exit(tmp_path):
    """tools/run_series.py sets SLOWER_PEAK_FILE for each chapter's kernel: the process writes its peak memory there
    as it exits (host: its resident set, which the 64 MiB it allocated must show)."""
    peak = tmp_path / "peak.json"
    code = "import slower_harness.env; x = bytearray(64 * 2**20); x[::4096] = b'x' * len(x[::4096])"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2],
                   env=dict(os.environ, SLOWER_MODE="cpu", SLOWER_PEAK_FILE=str(peak)))
    memory = json.loads(peak.read_text())
    assert memory["gpu_bytes"] == 0 and memory["host_bytes"] > 64 * 2**20


def test_a_notebook_kernel_writes_its_peak_memory_after_every_cell(tmp_path):
    """In a notebook the peak is written after every cell too: a kernel stopped without a normal exit (killed, as a
    runner may stop it) runs no atexit hook, and its chapter's peak memory would be lost."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    kernels = env.ROOT / "build" / "jupyter" / "share" / "jupyter"  # where tools/install.py --test puts the kernel
    if not (kernels / "kernels" / "python3").exists():
        pytest.skip("no python3 kernel for this Python (python tools/install.py --test installs it)")
    peak = tmp_path / "peak.json"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import slower_harness.env"),
                                         nbformat.v4.new_code_cell("import os; os._exit(0)")])  # no atexit hook runs
    saved = dict(os.environ)
    os.environ.update(SLOWER_PEAK_FILE=str(peak), SLOWER_MODE="cpu", JUPYTER_PATH=str(kernels))  # the kernel's
    try:
        client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=300,
                                         resources={"metadata": {"path": str(env.ROOT)}})
        with pytest.raises(Exception):  # the kernel dies in the second cell
            client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert json.loads(peak.read_text())["host_bytes"] > 0
