"""The measuring harness behind ``helpers``: modules of one job each.

The chapters import ``helpers`` only, a facade that re-exports from here. Imports run one way, down this list, and
never back up to ``helpers``: a module may import the ones above it, not those below (``tests/test_harness_layout.py``
checks it, with each module's size). Where to go for a change:

- ``specs``: what the series takes as given: GPU data sheets (bandwidth, peak compute, the T4's and the H200's
  make-up) and Qwen3-0.6B's architecture with its tiny CPU stand-in. Data only.
- ``formats``: every number format: a number in a table or a line, a ratio read both ways, counts and sizes in
  binary units, tick labels, decimal places that keep a value apart from a bar. Pure Python.
- ``stats``: numbers, not sentences. Ratios of timings over shuffled rounds, the one verdict rule (slower, faster or
  within noise, against the A/A floor; a new verdict rule goes here), trends across a sweep. Pure Python.
- ``modes``: the modes (full, quick, cpu) and how one is chosen, every size per mode, the tolerances, CPU pinning.
  Definitions only.
- ``env``: where this run happens: the mode chosen, device and dtype, the GPU's short name, where results go,
  this mode's sizes, the versions recorded beside every number. Its process-wide effects (Triton's interpreter
  in CPU mode, CPU pinning, matplotlib's backend) happen in one call, ``setup``, at its import: a module that
  imports Triton, ``slower_kernels`` or matplotlib imports ``env`` first.
- ``timing_order``: time first, profile after: what profiled in this process, and the refusal of a host-clock
  timing after it.
- ``budget``: the launch budget, what a decoded token should cost from its launches, their prices and the GPU-busy
  time (per swap, per kind of module call, or replayed from a CUDA graph).
- ``results``: one table of results per run (``record``, ``results``), the catalogue of every result id with the
  blog's T4 figures (a new result id goes in ``data/catalogue.csv``, read here), and the tables that set a run
  beside the committed one and the blog's.
- ``display``: what a reader sees: tables, progress bars, markdown in a notebook, figures and sweeps saved beside
  the results (``save_figure``, where every new figure goes), plain tick labels. It writes no sentences.
- ``machine``: what a GPU is made of (data sheet beside the device's own report), the memory hierarchy and the
  roofline drawn from it, and what the compiler made of a kernel for a T4 and an H200.
- ``exercises``: a reader's guess (faster, slower, the same) checked against a measured ratio.
- ``timeline``: one decode step on a time axis from the profiler's trace (host launches against GPU kernels), and
  its figure.
- ``clocks``: the two clocks, named: GPU time (CUDA-graph replay, the profiler's kernel time) and host time per
  call, the kernels a call launches, a CUDA graph's gap between kernels, the price of one launch. A new clock
  goes here.
- ``model``: loading Qwen3-0.6B (hub, local checkpoint, or seeded random weights), the tiny CPU model, its census
  and its prompts.
- ``decoders``: how a configuration generates: transformers' ``generate()``, our ``GraphDecoder`` (one CUDA graph
  per decoded token), or transformers' compiled path.
- ``patching``: our kernels swapped into the model and back (``patched``), and the configurations the chapters
  compare (``ALL_CUSTOM``, ``ALL_FAST``, ``STAIRCASE``: a new configuration of the model goes here).
- ``capture``: one decode step's module calls captured to be replayed on their own and priced.
- ``profiles``: where a decoded token's time goes: kernels and GPU-busy ms per token, one step traced on a time
  axis, the weight-read floor.
- ``compare``: comparisons in shuffled, counterbalanced rounds with their own A/A floor: the model's
  configurations (``capture_prices``, ``compare_configs``, ``profile_configs``: price, measure, profile, each its
  own call; ``Comparison.record`` records) and kernel calls (``compare_calls``).
- ``reproduce``: the headline ratios measured again and set beside the committed run.
"""
