"""The experiment harness every chapter imports: one import surface over the ``slower_harness`` package.

Each chapter asks the same questions, answered the same way every time:

* where am I running, and how big should things be (``MODE``, ``show_env``, ``SIZES``);
* which model (``load_model``: the hub checkpoint, or the same architecture with random weights);
* what happens when our kernels replace PyTorch's (``patched``, and the configurations ``ALL_CUSTOM``, ``ALL_FAST``);
* how long does a kernel take, on which clock (``compare_calls``, ``gpu_ms_per_call``, ``host_ms_per_call``);
* how fast does the model generate, and where does the time go (``compare_configs``, then ``profile_configs``);
* is a difference real (``verdict``, ``verdict_line``), and what did we and the blog measure (``record``, ``compare``).

This file holds no logic: it re-exports, by topic, what the chapters, tools and tests call. To change how
something works, open the module named in each group (``slower_harness/__init__.py`` says which owns what).
Imports point one way: notebooks -> helpers -> slower_harness -> slower_kernels.
"""
from __future__ import annotations

# Where this run happens: the mode, device and dtype, sizes, tolerances, paths (slower_harness/env.py, modes.py).
# env comes first: importing it settles Triton's interpreter (CPU mode) and matplotlib's backend.
from slower_harness.env import (  # noqa: F401
    COMMITTED_DIR, DEVICE, DTYPE, HAS_GPU, IN_NOTEBOOK, MODE, PINNED_CPUS, RESULTS_DIR, RESULTS_ROOT, ROOT, SIZES,
    SLUG, TRACES_DIR, env_info, hardware_slug, show_env, tolerance)
from slower_harness.modes import (  # noqa: F401
    MODE_NOTES, MODES, SIZES_BY_MODE, TOLERANCE, Sizes, parse_cpus, pin_cpus, resolve_mode)

# What the series takes as given: GPU data sheets, Qwen3-0.6B's architecture (slower_harness/specs.py).
from slower_harness.specs import GPU_SPECS, NOMINAL_GB_S, NOMINAL_TFLOPS, QWEN3_0_6B, TINY_QWEN3  # noqa: F401

# Numbers: their formats (formats.py), ratios over rounds, the one verdict rule, trends (stats.py).
from slower_harness.formats import (  # noqa: F401
    bytes_label, count_label, fmt, places_apart, plain_number, table_number, versus)
from slower_harness.stats import (  # noqa: F401
    MIN_EFFECT, Ratio, Trend, Verdict, noise_threshold, noisier_floor, read_trend, threshold_pct, verdict,
    verdict_line)

# What a reader sees: tables, progress, figures (display.py).
from slower_harness.display import (  # noqa: F401
    generation_progress, launch_note, md, plain_log_ticks, progress, save_figure, save_sweep, show)

# Results: one table per run, the catalogue of result ids, the blog's figures beside ours (results.py).
from slower_harness.results import (  # noqa: F401
    CATALOGUE_PATH, CHAPTER_OF_PREFIX, MODEL, RESULT_COLUMNS, UNIT_WORDS, blog, blog_numbers, catalogue,
    catalogue_entry, compare, describe_model, record, results, results_path, summary_table, write_csv_atomically)

# The two clocks: GPU time and host time, launches, the graph's gap (clocks.py); time first, profile after
# (timing_order.py).
from slower_harness.timing_order import PROFILED_BY  # noqa: F401
from slower_harness.clocks import (  # noqa: F401
    CLOCK_LABELS, GPU_REP_MS, GRAPH_GAP_KERNELS, LaunchPrices, cold_copies, cold_gpu_us, copy_gpu_us, gpu_ms_per_call,
    graph_kernel_gap_us, graph_us_per_launch, host_ms_per_call, host_us_alone, launch_prices, launches_per_call,
    ms_per_call)

# The model, its prompt, and how it generates (model.py, decoders.py).
from slower_harness.model import PROMPT_TEXT, load_model, make_prompt, module_census, random_qwen3  # noqa: F401
from slower_harness.decoders import (  # noqa: F401
    DECODERS, OWN_DECODERS, GraphDecoder, OwnCacheDecoder, decoder_for, generate)

# Our kernels in the model, and the configurations the chapters compare (patching.py).
from slower_harness.patching import (  # noqa: F401
    ALL_CUSTOM, ALL_FAST, ATTENTION_NAMES, BESIDE_STAIRCASE, FLOOR_STAIRCASE, PROJECTION_GROUPS, STAIRCASE,
    generate_with, patched, split_config)

# Where a token's time goes: module calls captured and priced (capture.py), decode profiles, one step on a
# time axis, the weight-read floor (profiles.py, timeline.py), and the launch budget (budget.py).
from slower_harness.capture import capture_module_calls, count_module_calls  # noqa: F401
from slower_harness.profiles import (  # noqa: F401
    KERNEL_FAMILIES, PYTORCH_FAMILY, bandwidth, decode_breakdown, kernel_family, step_timeline)
from slower_harness.timeline import (  # noqa: F401
    BUSY_US, HOST_LAUNCH_NAMES, SPAN_US, TIMELINE_LANES, plot_timelines, timeline_from_trace, timeline_summary)
from slower_harness.budget import (  # noqa: F401
    PREDICTION_BAR, TOO_LITTLE_SWAPPED, DecodeProfile, LaunchBudget, ModuleBudget, ModuleCall, ModulePrice,
    fit_module_budget, graph_step_ms)

# Comparisons in shuffled rounds with their A/A floor: configurations of the model, calls of kernels (compare.py).
from slower_harness.compare import (  # noqa: F401
    CALL_CLOCKS, ORIGINAL, ORIGINAL_AGAIN, REFERENCE, REFERENCE_AGAIN, CallComparison, Comparison, Prices,
    capture_prices, compare_calls, compare_configs, profile_configs)

# The headline ratios again, beside the committed run (reproduce.py).
from slower_harness.reproduce import (  # noqa: F401
    KERNEL_RATIO_IDS, REPRODUCE_BAR, REPRODUCE_CONFIGS, SMALL_EFFECTS, reproduce, reproduce_configs)

# What a GPU is made of: data sheet, memory hierarchy, roofline, compiler output (machine.py); exercises.
from slower_harness.machine import (  # noqa: F401
    compiler_table, gpu_specs, gpu_table, plot_memory_hierarchy, plot_roofline, ptx_excerpt)
from slower_harness.exercises import ANSWERS, check_answer  # noqa: F401
