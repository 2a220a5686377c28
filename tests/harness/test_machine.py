"""slower_harness.machine: the GPU's make-up beside its data sheet, the memory hierarchy, the roofline, and what the
compiler made of a kernel."""
import pandas as pd
import pytest

from slower_harness import env, machine, specs


def test_the_roofline_draws_each_kernel_under_its_roofs():
    plt = pytest.importorskip("matplotlib.pyplot")
    points = pd.DataFrame({"label": ["add", "gemv"], "group": ["slow", "fast"], "flops": [1e6, 2e8],
                           "bytes": [6e6, 2e8], "gpu_ms": [0.002, 0.05]})
    fig = machine.plot_roofline(points, slug="h200")
    ax = fig.axes[0]
    assert [c.get_offsets().shape[0] for c in ax.collections] == [1, 1]
    assert "4,800 GB/s" in ax.get_legend().get_texts()[0].get_text()
    assert ax.get_title(loc="left").startswith("Roofline of the NVIDIA H200")
    plt.close(fig)
    crowd = pd.DataFrame({"label": ["gate/up", "q/k/v", "down"], "group": ["fast"] * 3, "flops": [2e8] * 3,
                          "bytes": [2e8] * 3, "gpu_ms": [0.05, 0.051, 0.052]})  # three points on one spot
    fig = machine.plot_roofline(crowd, slug="h200")
    ax = fig.axes[0]  # no labels stacked on the points: each point in the legend, in a colour of its own
    assert not ax.texts
    assert [t.get_text() for t in ax.get_legend().get_texts()][2:] == ["fast: gate/up", "fast: q/k/v", "fast: down"]
    colours = {tuple(c.get_facecolor()[0]) for c in ax.collections}
    assert len(colours) == 3
    plt.close(fig)
    with pytest.raises(ValueError, match="missing columns"):
        machine.plot_roofline(points.drop(columns="gpu_ms"), slug="h200")
    with pytest.raises(ValueError, match="no nominal bandwidth and compute"):
        machine.plot_roofline(points, slug="mystery")


# --- The machine (chapter 1), the compiler table (chapters 2-4) ---------------------------------------
def test_the_gpu_table_puts_a_t4_beside_an_h200():
    df = machine.gpu_table()
    assert {"Tesla T4", "NVIDIA H200"} <= set(df.columns) and "name" not in df.index
    assert df.loc["SMs", "Tesla T4"] == 40 and df.loc["SMs", "NVIDIA H200"] == 132
    assert df.loc["memory bandwidth (GB/s, nominal)", "NVIDIA H200"] == specs.NOMINAL_GB_S["h200"]
    # the ridge point: tensor-core flop/s over bytes/s, 65 TFLOP/s / 320 GB/s on a T4
    assert df.loc["ridge point (flop per byte)", "Tesla T4"] == round(65e3 / 320)
    assert (len(df.columns) == 3) == env.HAS_GPU


def test_the_memory_hierarchy_shrinks_towards_the_cores():
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = machine.plot_memory_hierarchy()
    bars = fig.axes[0].containers
    assert len(bars) == len(specs.GPU_SPECS) + (env.HAS_GPU and env.SLUG not in specs.GPU_SPECS)
    for container in bars:
        widths = [b.get_width() for b in container]
        assert widths[-1] == max(widths) and widths[-2] < widths[-1]  # device memory is the largest level
    plt.close(fig)


def test_the_compiler_table_and_a_ptx_excerpt_come_from_a_compiler_process():
    df = machine.compiler_table(["add_kernel"])
    assert set(df["kernel"]) == {"add_kernel"} and set(df["cc"]) == {75, 90}
    assert (df["widest global load"] == "v4").all()
    excerpt = machine.ptx_excerpt("add_kernel", df["label"][0], 75, r"ld\.global", max_lines=1)
    assert excerpt.startswith("@%p") or excerpt.startswith("ld.global"), excerpt
    assert "ld.global.v4" in excerpt
    assert "ptx" not in df.columns and "registers" in df.columns  # the PTX is kept aside for the excerpts
    label = df["label"][0]  # the excerpt reads the table's PTX: the same text a compiler process makes of that kernel
    kept, fresh = machine._PTX["add_kernel", label, 75], machine._aot("--ptx-text", "add_kernel", label, "75")
    assert kept.rstrip() == fresh.rstrip() and ".target sm_75" in kept
    with pytest.raises(ValueError, match="not in the compiler table"):
        machine.compiler_table(["no_such_kernel"])
    with pytest.raises(RuntimeError, match="labels of 'add_kernel'"):
        machine.ptx_excerpt("add_kernel", "BLOCK_SIZE=3", 75, "ld")
