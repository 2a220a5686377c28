"""The launch budget: what a decoded token should cost, from its launches and the price of each (the host's
part), plus the GPU-busy time; priced per swap (LaunchBudget), per kind of module call (ModuleBudget,
fit_module_budget), or, replayed from a CUDA graph, as kernels x the graph's gap (graph_step_ms).
Numbers only: the profiles it reads are measured elsewhere."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from slower_harness.stats import MIN_EFFECT

# where no in-situ factor is read (ModuleBudget.implied_in_situ): the words chapters 8 and 9 and the fit use
TOO_LITTLE_SWAPPED = f"change the original's time by less than {100 * MIN_EFFECT:.0f}% at prices alone"


@dataclass
class DecodeProfile:
    """Per decoded token, prefill excluded (an N-token generation minus a 1-token one), from one
    ``compare_configs`` run: wall time from its shuffled rounds, launches and GPU-busy time from
    torch.profiler after them (``Comparison.profile``)."""
    launches_per_token: float | None      # every CUDA kernel (GPU only)
    gpu_busy_ms_per_token: float | None   # summed kernel durations (GPU only)
    wall_ms_per_token: float
    gpu_idle_fraction: float | None       # 1 - busy / wall
    project_launches_per_token: float     # our Triton kernels only (any target)
    tokens_profiled: int   # new tokens of the profiled generation
    note: str = ""
    # kind -> ModulePrice (capture_prices): our modules' calls, or for the original the calls of its
    # own modules that ours replace; empty where unpriced
    modules: dict = field(default_factory=dict)

    @property
    def launches(self) -> float:
        """Every CUDA kernel per token on a GPU; our own kernels only, where no GPU was profiled."""
        return self.launches_per_token if self.launches_per_token is not None else self.project_launches_per_token


def graph_step_ms(gpu_busy_ms: float, kernels: float, gap_us: float) -> float:
    """Predicted wall ms of a decode step replayed from a CUDA graph: the host launches one graph and is out of
    the way, so the step takes the GPU's time, its kernels' own (``gpu_busy_ms``) plus one gap per kernel
    (``graph_kernel_gap_us``)."""
    for name, value in (("gpu_busy_ms", gpu_busy_ms), ("kernels", kernels), ("gap_us", gap_us)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number (a GPU profile's; CPU mode has none), got {value!r}")
    if gpu_busy_ms < 0 or kernels < 0:
        raise ValueError(f"gpu_busy_ms and kernels must be >= 0, got {gpu_busy_ms!r} and {kernels!r}")
    return gpu_busy_ms + kernels * gap_us / 1e3


@dataclass
class ModuleCall:
    """One kind of module as a decode step calls it (``capture_module_calls``): ours, or the original's own."""
    kind: str          # the class, with its mode ("TritonRMSNorm(fused)"), or the attention ("attention (fast)")
    per_token: float   # calls per decoded token (ours: from outside any other module of ours; the original's: all)
    replay: object     # a function making one captured decode-step call again, with the same arguments
    kernels: float | None = None  # CUDA kernels one call launches (ours and PyTorch's); None until counted, or on CPU
    ours: float = 0.0  # our Triton launches per call
    reset: object = None  # puts the captured KV cache back as it was at the captured call (None: nothing to put back)
    twin: str | None = None  # the kind of the original's module this one replaces ("Linear", "attention (sdpa)")


@dataclass
class ModulePrice:
    """What one kind of module costs per decoded token: calls, price alone, kernels per call (a module of ours,
    with the kind of the original's module it replaces; or one of the original's own)."""
    per_token: float      # calls per decoded token
    alone_us: float       # host µs per call on its own (``host_us_alone``), median over the rounds
    kernels: float | None  # CUDA kernels per call (None in CPU mode)
    quartiles: str = "-"  # of the alone price over the rounds
    twin: str | None = None  # the original's kind this one replaces (None: the original's own module)


PREDICTION_BAR = 0.20  # a launch-budget prediction within 20% of the measured wall ms per token holds


@dataclass
class LaunchBudget:
    """The launch budget in its simplest form, for one swap: a price per PyTorch launch and one per launch of ours.

    A decoded token costs the host a price per PyTorch launch (the framework's Python around each op, plus
    the launch) times PyTorch's launches, plus a price per launch of ours (our launcher's Python: checks,
    allocation, grid, Triton's dispatch) times ours, and then the GPU-busy time on top. Chapters 3 to 5
    predict their swap with it, from prices they measure themselves (``fitted_on`` says where each came
    from); chapters 8 and 9 price every kind of call of ours on its own (``ModuleBudget``).
    """
    torch_us: float     # host µs per PyTorch launch inside generate()
    ours_us: float      # host µs per launch of our Triton kernels inside generate()
    fitted_on: tuple    # where the two prices came from

    def host_ms(self, profile: "DecodeProfile") -> float:
        ours = profile.project_launches_per_token
        return ((profile.launches - ours) * self.torch_us + ours * self.ours_us) / 1e3

    def predict_ms(self, profile: "DecodeProfile") -> float:
        """Wall ms per decoded token: host work plus GPU-busy time."""
        return self.host_ms(profile) + (profile.gpu_busy_ms_per_token or 0.0)


@dataclass
class ModuleBudget:
    """The launch budget priced module by module: what each swap adds to the original's time per token.

    Every call of a module of ours replaces one call of the original's module (``ModulePrice.twin``: a
    ``GemvLinear`` an ``nn.Linear``, a ``FastDecoderLayer`` a ``Qwen3DecoderLayer``, our attention function
    transformers' own). Each is priced on its own, in the same rounds as the wall times
    (``capture_prices``): the host time of one call, its kernels' launches and the framework's
    Python around them included. A configuration's host time per decoded token is the original's measured
    wall time plus, for every call swapped, our call's price minus the replaced call's price, times
    ``in_situ``: how much dearer calls are inside the model than in a loop on their own (the rest of the
    step competes for the host's caches). The GPU works while the host is still launching, so the token
    takes the longer of the two: ``max(host, GPU-busy)``. ``base_ms`` is measured (the original's wall ms per
    token, the first of ``fitted_on``); ``in_situ`` is solved from the second; every other configuration is
    predicted. The same in CPU mode, on the interpreter's clock (no GPU-busy time there).
    """
    base_ms: float      # the original's wall ms per decoded token
    twins: dict         # the original's kind -> ModulePrice of its calls (the original's DecodeProfile.modules)
    in_situ: float      # calls' host time in the model over their price alone
    fitted_on: tuple    # (the original, the configuration in_situ was solved from)

    def added_ms(self, price: "ModulePrice") -> float:
        """Host ms per decoded token that one kind of call of ours adds at prices alone: its calls per token
        times its price minus the price of the original's call it replaces (``price.twin``)."""
        if price.twin not in self.twins:
            raise ValueError(f"price: the original's {price.twin!r} was not priced; capture_prices "
                             "prices the original's modules that the priced configurations replace")
        return price.per_token * (price.alone_us - self.twins[price.twin].alone_us) / 1e3

    def swapped_ms(self, profile: DecodeProfile) -> float:
        """Host ms per decoded token that ``profile``'s swaps add at prices alone: the sum of ``added_ms`` over
        its calls of ours."""
        ours = [m for m in profile.modules.values() if m.twin]  # the original's own modules name no twin
        missing = sorted({m.twin for m in ours} - set(self.twins))
        if missing:
            raise ValueError(f"profile: the original's {missing} were not priced; capture_prices "
                             "prices the original's modules that the priced configurations replace")
        return sum(self.added_ms(m) for m in ours)

    def host_ms(self, profile: DecodeProfile) -> float:
        return self.base_ms + self.in_situ * self.swapped_ms(profile)

    def predict_ms(self, profile: DecodeProfile) -> float:
        """Wall ms per decoded token: the longer of host work and GPU-busy time."""
        return max(self.host_ms(profile), profile.gpu_busy_ms_per_token or 0.0)

    def implied_in_situ(self, profile: DecodeProfile) -> float | None:
        """The in-situ factor that would put ``profile`` exactly on its measured wall time. None where the swaps
        change the original's time by less than ``MIN_EFFECT`` at prices alone (nothing swapped, or prices that
        nearly cancel): there the measured difference is mostly noise, and a factor read from it means nothing."""
        added = self.swapped_ms(profile)
        if abs(added) < MIN_EFFECT * self.base_ms:
            return None
        return (profile.wall_ms_per_token - self.base_ms) / added


def fit_module_budget(profiles: dict, fitted_on: tuple) -> ModuleBudget:
    """``ModuleBudget`` from two configurations of ``profiles`` (name -> DecodeProfile, priced): the first is
    the original (its wall time is the base, its modules' prices the replaced calls'), the second sets the
    in-situ factor."""
    if len(fitted_on) != 2 or any(name not in profiles for name in fitted_on):
        raise ValueError(f"fitted_on: name two of {list(profiles)}, got {fitted_on!r}")
    base, other = (profiles[name] for name in fitted_on)
    if any(m.twin for m in base.modules.values()):
        raise ValueError(f"fitted_on[0]: {fitted_on[0]!r} calls modules of ours; the base is the original, "
                         "whose own modules are priced (capture_prices)")
    if not base.modules:
        raise ValueError(f"fitted_on[0]: {fitted_on[0]!r} has no priced module; compare with "
                         "capture_prices, which prices the original's replaced modules")
    if not any(m.twin for m in other.modules.values()):
        raise ValueError(f"fitted_on[1]: {fitted_on[1]!r} has no priced module of ours; compare it with "
                         "capture_prices and pick one that calls ours")
    budget = ModuleBudget(base.wall_ms_per_token, dict(base.modules), 1.0, tuple(fitted_on))
    in_situ = budget.implied_in_situ(other)
    if in_situ is None:
        raise ValueError(f"fitted_on[1]: {fitted_on[1]!r}'s swaps {TOO_LITTLE_SWAPPED} ({fitted_on[0]!r}); fit "
                         "the factor on one whose swaps add more")
    if in_situ <= 0:
        raise ValueError(f"fitted_on[1]: {fitted_on[1]!r} measured {other.wall_ms_per_token:.3g} ms per token against "
                         f"the base's {base.wall_ms_per_token:.3g}, the other way from what its swaps add at prices "
                         f"alone ({budget.swapped_ms(other):+.3g} ms): no positive factor fits; the host's noise is "
                         "larger than the swaps here")
    budget.in_situ = in_situ
    return budget
