"""The measuring harness behind ``helpers``, split into modules of one job each.

The chapters import ``helpers`` only; ``helpers`` imports from here. Imports run one way, down this list, and never
back up to ``helpers``: a module may import the ones above it, not those below (``tests/test_harness_layout.py``
checks it, with each module's size).

- ``specs``: what the series takes as given: GPU data sheets (bandwidth, peak compute, the T4's and the H200's
  make-up) and Qwen3-0.6B's architecture with its tiny CPU stand-in. Data only.
- ``stats``: numbers, not sentences. Ratios of timings over shuffled rounds, the one verdict rule (slower, faster or
  within noise, against the A/A floor), trends across a sweep, and the number formats that tables, ticks and
  verdicts print with. No torch.
- ``modes``: the modes (full, quick, cpu) and how one is chosen, every size per mode, the tolerances, CPU pinning.
  Definitions only: helpers resolves the mode and pins, once, at its import.
- ``env``: where this run happens: the mode chosen, device and dtype, the GPU's short name, where results go,
  this mode's sizes, the versions recorded beside every number. Its process-wide effects (Triton's interpreter
  in CPU mode, CPU pinning, matplotlib's backend) happen in one call, ``setup``, at its import.
- ``budget``: the launch budget, what a decoded token should cost from its launches, their prices and the GPU-busy
  time (per swap, per kind of module call, or replayed from a CUDA graph).
- ``results``: one table of results per run (``record``, ``results``), the catalogue of every result id with the
  blog's T4 figures, and the tables that set a run beside the committed one and the blog's.
- ``display``: what a reader sees: tables, progress bars, markdown in a notebook, figures and sweeps saved beside
  the results, plain tick labels. It shows numbers; it writes no sentences.
- ``machine``: what a GPU is made of (data sheet beside the device's own report), the memory hierarchy and the
  roofline drawn from it, and what the compiler made of a kernel for a T4 and an H200.
- ``exercises``: a reader's guess (faster, slower, the same) checked against a measured ratio.
- ``timeline``: one decode step on a time axis from the profiler's trace (host launches against GPU kernels), and
  its figure.

The split is under way: what is not listed here still lives in ``helpers.py``.
"""
