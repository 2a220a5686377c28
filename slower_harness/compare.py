"""Comparisons in shuffled, counterbalanced rounds with their own A/A floor: configurations of the model on the wall
clock (``compare_configs``), then profiled (``profile_configs``) and priced (``capture_prices``) as separate calls;
and calls against a reference call on one clock (``compare_calls``)."""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

import pandas as pd

from slower_harness import env
from slower_harness.budget import DecodeProfile, ModulePrice
from slower_harness.capture import capture_module_calls, count_module_calls
from slower_harness.clocks import CLOCK_LABELS, host_us_alone, loop_ms, ms_per_call
from slower_harness.decoders import DECODERS, check_decoder
from slower_harness.display import progress
from slower_harness.model import make_prompt
from slower_harness.patching import generate_with, patched, split_config
from slower_harness.profiles import count_decode
from slower_harness.results import record
from slower_harness.stats import Ratio, Verdict, verdict
from slower_harness import timing_order
from slower_harness.timing_order import host_clock_free


# --- Interleaved comparisons and the verdict ----------------------------------------------------
ORIGINAL, ORIGINAL_AGAIN = "original", "original (again)"  # the A/A pair: the original against itself


def _shuffled(names, r: int, seed: int) -> list:
    """Round ``r``'s order of ``names``: shuffled with a fixed seed (every run sees the same orders), and
    counterbalanced: each pair of rounds runs one shuffled order forwards, then backwards (ABBA). Over a pair
    every name sits at the same mean position, so a host that drifts steadily within a round slows no name
    more than another, and the original and its A/A copy swap places."""
    order = list(names)
    random.Random(seed * 10_007 + r // 2).shuffle(order)
    return order[::-1] if r % 2 else order


def _ratios_to(times: dict, base: str) -> dict:
    """name -> Ratio of its per-round times over ``base``'s time in the same round (``base`` left out)."""
    return {name: Ratio.of([t / b for t, b in zip(ts, times[base])]) for name, ts in times.items() if name != base}


def _record_ratio(id: str, ratio: Ratio, floor: Ratio, v: Verdict, method: str, note: str) -> Verdict:
    """Record a time ratio ("x slower") with its quartiles, its verdict and the run's A/A floor."""
    record(id, ratio.median, "x slower", (note + "; " if note else "") + f"{method}, A/A floor "
           f"{floor.median:.3f} ({floor.quartiles})", spread=ratio, verdict=v.text)
    return v


@dataclass
class Comparison:
    """Configurations of one model measured in shuffled rounds, against the original in each round."""
    tokens_per_s: dict     # name -> median tokens/s over the rounds
    seconds: dict          # name -> the per-round seconds of one generation of ``new_tokens``
    ratios: dict           # name -> Ratio of its time to the original's, round by round (ORIGINAL_AGAIN too)
    orders: list           # the order of each round
    prompt_len: int
    new_tokens: int
    first_seconds: dict = field(default_factory=dict)  # name -> per-round seconds of a 1-token generation
    configs: dict = field(default_factory=dict)  # name -> its configuration (ORIGINAL and ORIGINAL_AGAIN included)
    ids: object = None     # the prompt every generation started from ([1, prompt_len] token ids)
    counts: dict = field(default_factory=dict)  # name -> (launches, GPU-busy ms, our launches) per decoded token
    profiled_tokens: int = 0  # new tokens of each profiled generation (profile_configs)
    module_calls: dict = field(default_factory=dict)  # name -> {kind: ModuleCall} (capture_prices)
    module_us: dict = field(default_factory=dict)     # name -> {kind: [host µs per call alone, one per round]}

    @property
    def floor(self) -> Ratio:
        """The A/A floor of this very run: the original against itself."""
        return self.ratios[ORIGINAL_AGAIN]

    def verdict(self, name: str) -> Verdict:
        """``name`` against this run's A/A floor; the floor itself against the minimum effect alone (judged
        against itself it could never stand out, and a floor that does says the host was noisy)."""
        return verdict(self.ratios[name], None if name == ORIGINAL_AGAIN else self.floor)

    def prefill_ms(self, name: str) -> float:
        """Median wall ms of a 1-token generation (one forward pass over the prompt) in the same rounds."""
        if not self.first_seconds:
            raise ValueError("prefill_ms: this comparison generated one token per run (new_tokens=1); "
                             "its seconds are the prefill times")
        return statistics.median(self.first_seconds[name]) * 1e3

    def decode_ms(self, name: str) -> Ratio:
        """Wall ms per decoded token, prefill excluded: (N-token time - 1-token time) / (N - 1), round by round.

        The one definition of time per token in the series: both runs of a round are back to back, in the
        same shuffled rounds as the ratios, so the host's drift hits every configuration alike."""
        if not self.first_seconds:
            raise ValueError("decode_ms: needs new_tokens > 1 (a 1-token generation is all prefill)")
        steps = self.new_tokens - 1
        return Ratio.of([(t - f) * 1e3 / steps for t, f in zip(self.seconds[name], self.first_seconds[name])])

    def decode_ratio(self, name: str) -> Ratio:
        """Wall ms per decoded token of ``name`` over the original's, round by round (above 1: slower)."""
        return self.between(name, ORIGINAL, "decode")

    def between(self, a: str, b: str, of: str = "generation") -> Ratio:
        """``a``'s time over ``b``'s, round by round (above 1: ``a`` is slower), of a whole ``"generation"`` (what
        ``ratios`` holds against the original), a ``"decode"`` step (``decode_ms``) or the ``"prefill"`` (the
        1-token generation): any two configurations, since every one ran in every round."""
        times = {"generation": lambda n: self.seconds[n], "decode": lambda n: self.decode_ms(n).values,
                 "prefill": lambda n: self.first_seconds[n]}
        if of not in times:
            raise ValueError(f"of must be one of {sorted(times)}, got {of!r}")
        if of == "prefill" and not self.first_seconds:
            raise ValueError("between(of='prefill'): this comparison generated one token per run (new_tokens=1)")
        return Ratio.of([x / y for x, y in zip(times[of](a), times[of](b))])

    def wall_ms_per_token(self, name: str) -> tuple[float, str]:
        """(wall ms per decoded token, how it was read): the original's median over the rounds, times
        ``name``'s median per-round ratio to it. The host's speed drifts between rounds (on the H200 by a
        quarter) and a ratio within a round cancels the drift, so every configuration is read against the
        same original."""
        base = self.decode_ms(ORIGINAL).median
        wall = base * (self.decode_ratio(name).median if name != ORIGINAL else 1.0)
        if base > 0 and wall > 0:
            return wall, f"original's median of {len(self.orders)} shuffled rounds x the per-round ratio to it"
        # timing noise larger than the decode steps (tiny models in CPU mode): the average over all steps
        return (statistics.median(self.seconds[name]) * 1e3 / self.new_tokens,
                f"decode too short to isolate: wall per token averaged over all {self.new_tokens} steps")

    def profile(self, name: str) -> DecodeProfile:
        """Launches, GPU-busy and wall ms per decoded token for ``name`` (after ``profile_configs``); the wall
        time as ``wall_ms_per_token`` reads it."""
        if name not in self.counts:
            raise KeyError(f"profile: {name!r} was not profiled; profile_configs(comparison, model) counts it")
        launches, busy, ours = self.counts[name]
        wall, note = self.wall_ms_per_token(name)
        if not env.HAS_GPU:
            note += "; CPU mode: launches are our Triton kernels only, wall is interpreter time"
        idle = None if busy is None else max(0.0, 1 - busy / wall)
        return DecodeProfile(launches, busy, wall, idle, ours, self.profiled_tokens, note, self.module_prices(name))

    def module_prices(self, name: str) -> dict:
        """kind -> ``ModulePrice`` for ``name``'s modules of ours, or for the original the kinds of its own modules
        that ours replace (``capture_prices``); empty if unpriced."""
        out = {}
        for kind, call in self.module_calls.get(name, {}).items():
            r = Ratio.of(self.module_us[name][kind])
            out[kind] = ModulePrice(call.per_token, r.median, call.kernels, r.quartiles, call.twin)
        return out

    def record(self, name: str, id: str, note: str = "") -> Verdict:
        """Record the time ratio of ``name`` to the original under ``id`` ("x slower"), with its quartiles
        and verdict; returns the verdict."""
        return _record_ratio(id, self.ratios[name], self.floor, self.verdict(name),
                             f"median of {len(self.orders)} shuffled rounds", note)

    def table(self, per_token: bool = False):
        """One row per configuration: median tokens/s, ratio to the original with its quartiles, verdict;
        with ``per_token``, also wall ms per decoded token (``wall_ms_per_token``) and, where profiled,
        launches and GPU-busy ms."""
        rows = []
        for name, tps in self.tokens_per_s.items():
            r = self.ratios.get(name)
            row = {"configuration": name, "tokens/s (median)": tps,
                   "time ratio to original (median)": r.median if r else 1.0,
                   "quartiles": r.quartiles if r else "-",
                   "verdict": (self.verdict(name).text if name != ORIGINAL_AGAIN else
                               f"A/A floor: {100 * abs(r.median - 1):.1f}% off 1") if r else "reference"}
            if per_token and self.first_seconds:
                row["wall ms per decoded token"] = self.wall_ms_per_token(name)[0]
                if name in self.counts:
                    p = self.profile(name)
                    row["launches per token"] = p.launches
                    row["GPU-busy ms per token"] = p.gpu_busy_ms_per_token
            rows.append(row)
        return pd.DataFrame(rows)


@dataclass
class Prices:
    """Module calls captured before a comparison's rounds (``capture_prices``), to be timed alone in them."""
    calls: dict       # name -> {kind: ModuleCall}: ours per configuration, and the original's twins of them
    prompt_len: int
    new_tokens: int


def _sizes(prompt_len, new_tokens) -> tuple[int, int]:
    """A comparison's prompt length and new tokens: the mode's sizes unless given."""
    prompt_len = env.SIZES.prompt_len if prompt_len is None else prompt_len
    new_tokens = env.SIZES.new_tokens if new_tokens is None else new_tokens
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be at least 1, got {new_tokens}")
    return prompt_len, new_tokens


def _with_originals(configs: dict) -> dict:
    """``configs`` after the original and its A/A copy, each checked: a dict of ``patched`` arguments with a
    decoder that runs here."""
    reserved = {ORIGINAL, ORIGINAL_AGAIN} & set(configs)
    if reserved:
        raise ValueError(f"configs: {sorted(reserved)} are added by compare_configs itself; use other names")
    every = {ORIGINAL: {}, ORIGINAL_AGAIN: {}, **configs}
    for name, kwargs in every.items():
        if not isinstance(kwargs, dict):
            raise TypeError(f"configs[{name!r}] must be a dict of patched() arguments, got {type(kwargs).__name__}")
        _, decoder, use_cache = split_config(kwargs)
        try:
            check_decoder(decoder, use_cache)
        except ValueError:
            raise ValueError(f"configs[{name!r}]: decoder must be one of {DECODERS} ('compiled' on a GPU "
                             f"only, none but 'generate' without the KV cache), got {decoder!r}") from None
    return every


def capture_prices(model, configs: dict, names=None, prompt_len: int | None = None, new_tokens: int | None = None,
                   tokenizer=None) -> Prices:
    """Before a comparison's rounds: one decode-step call of each kind of module of ours in the configurations
    ``names`` (default: every one of ``configs`` that ``generate()``s eagerly with the KV cache), and of each kind
    of the original's modules that those replace (``capture_module_calls``). Pass the result to
    ``compare_configs(..., prices=)``, which times each call on its own right after its configuration's
    generations in every round, so that the prices see the same host as the wall times; ``profile_configs``
    then counts their kernels (``DecodeProfile.modules``, ``ModuleBudget``)."""
    prompt_len, new_tokens = _sizes(prompt_len, new_tokens)
    every = _with_originals(configs)
    eager = [n for n in every
             if n not in (ORIGINAL, ORIGINAL_AGAIN) and split_config(every[n])[1:] == ("generate", True)]
    names = eager if names is None else [n for n in names if n != ORIGINAL]
    bad = [n for n in names if n not in eager]
    if bad:
        raise ValueError(f"names: {bad} are not configurations here that generate() eagerly with the KV cache; "
                         f"choose from {eager}")
    if new_tokens < 2:
        raise ValueError("capture_prices: counting calls per decoded token needs new_tokens >= 2")
    ids = make_prompt(prompt_len, tokenizer, model.config.vocab_size)
    own_attention = model.config._attn_implementation  # what our attention function replaces
    calls = {}
    for name in names:
        kwargs, _, use_cache = split_config(every[name])
        with patched(model, **kwargs):
            calls[name] = capture_module_calls(model, ids, new_tokens, use_cache, original_attention=own_attention)
    twins = {c.twin for name in names for c in calls[name].values() if c.twin}
    if twins:  # the original's modules that ours replace, each priced the same way, in the original's rounds
        calls = {ORIGINAL: capture_module_calls(model, ids, new_tokens, kinds=twins), **calls}
    return Prices(calls, prompt_len, new_tokens)


def compare_configs(model, configs: dict, prompt_len: int | None = None, new_tokens: int | None = None,
                    rounds: int | None = None, tokenizer=None, seed: int = 0, prices: Prices | None = None) -> Comparison:
    """Tokens/s of several configurations of ``model``, interleaved so that host noise hits all alike.

    ``configs`` maps a name to the keyword arguments of ``patched`` (``{}`` is the original; a key
    ``use_cache=False`` generates without the KV cache, a key ``decoder`` picks how it generates:
    ``DECODERS``, see ``decoder_for``; "graph" and "compiled" build their static cache, capture or compile
    in every run before the timed part). The original and its copy ``ORIGINAL_AGAIN`` are always added: their
    ratio is the run's A/A noise floor. After one untimed warm-up generation of each, each of ``rounds`` rounds
    times one greedy generation of every configuration, in an order shuffled with a fixed seed and
    counterbalanced (``_shuffled``: each pair of rounds runs one order forwards, then backwards); each
    configuration's time is divided by the original's time of the same round. When ``new_tokens`` > 1, each
    generation is followed by a 1-token one, so that the wall time per decoded token (``Comparison.decode_ms``)
    comes from the same rounds. ``prices`` (``capture_prices``, same sizes): each captured call is timed on its
    own (``host_us_alone``) right after its configuration's generations in every round.

    Wall clock only: ``profile_configs`` counts kernels after the rounds, and ``Comparison.record`` records.
    """
    prompt_len, new_tokens = _sizes(prompt_len, new_tokens)
    rounds = env.SIZES.rounds if rounds is None else rounds
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    every = _with_originals(configs)
    calls = prices.calls if prices is not None else {}
    if prices is not None and (prices.prompt_len, prices.new_tokens) != (prompt_len, new_tokens):
        raise ValueError(f"prices: captured for prompt_len={prices.prompt_len}, new_tokens={prices.new_tokens}; this "
                         f"comparison runs {prompt_len} and {new_tokens}: capture them with the same sizes")
    unknown = [n for n in calls if n not in every]
    if unknown:
        raise ValueError(f"prices: {unknown} are not configurations here; capture them from these configs")
    host_clock_free("compare_configs")  # its rounds are wall time; profiles come after them
    ids = make_prompt(prompt_len, tokenizer, model.config.vocab_size)

    def run(name, n):
        return generate_with(model, every[name], ids, n)[1]

    warmed = []  # warm-up: every shape and specialisation met once, untimed
    for name in every:
        if every[name] not in warmed:  # a copy of a configuration already warmed (the A/A copy) is warm too
            run(name, new_tokens)
        warmed.append(every[name])
    per_token = new_tokens > 1
    seconds = {name: [] for name in every}
    first = {name: [] for name in every} if per_token else {}
    alone = {name: {kind: [] for kind in calls[name]} for name in calls}
    orders = []
    for r in progress(range(rounds), desc="rounds"):
        order = _shuffled(every, r, seed)
        orders.append(order)
        for name in order:
            seconds[name].append(run(name, new_tokens))
            if per_token:
                first[name].append(run(name, 1))
            for kind, call in calls.get(name, {}).items():  # the same host, right after its generations
                alone[name][kind].append(host_us_alone(call.replay, reset=call.reset))
    ratios = _ratios_to(seconds, ORIGINAL)
    tps = {name: new_tokens / statistics.median(ts) for name, ts in seconds.items()}
    return Comparison(tps, seconds, ratios, orders, prompt_len, new_tokens, first, every, ids,
                      module_calls=dict(calls), module_us=alone)


def profile_configs(comparison: Comparison, model, names=None) -> dict:
    """After the rounds: kernels, GPU-busy ms and our launches per decoded token of each configuration ``names``
    (default: all but the A/A copy), from profiled generations (``count_decode``), and the kernels of every
    call the comparison priced (``count_module_calls``). Fills ``comparison.counts``; returns name ->
    ``DecodeProfile`` (``Comparison.profile``). A profile leaves CUPTI attached, so host-clock timings refuse to
    run after it (``timing_order``)."""
    every = comparison.configs
    names = [n for n in every if n != ORIGINAL_AGAIN] if names is None else list(names)
    unknown = [n for n in names if n not in every]
    if unknown:
        raise ValueError(f"names: {unknown} are not configurations of this comparison; choose from {list(every)}")
    if comparison.new_tokens < 2:
        raise ValueError("profile_configs: counting per decoded token needs a comparison with new_tokens >= 2")
    # a few tokens are profiled, from a decoder built for the rounds' length: a graph decoder's attention splits
    # its keys by the length of its cache, so a shorter cache could change the count of kernels per token
    n = max(2, min(comparison.new_tokens, env.SIZES.profile_tokens))
    for name in names:
        kwargs, decoder, use_cache = split_config(every[name])
        with patched(model, **kwargs):
            # generate() is warm from the rounds; a graph decoder is built afresh here, and its first run captures
            # (the warm-up kernels of a capture would count in the n-token run and not in the 1-token one)
            comparison.counts[name] = count_decode(model, comparison.ids, n, use_cache, decoder,
                                                   warm=decoder != "generate", max_new_tokens=comparison.new_tokens)
    comparison.profiled_tokens = n
    for calls in comparison.module_calls.values():  # after the rounds, as the decode profiles
        count_module_calls(calls)
    return {name: comparison.profile(name) for name in names}


# --- Kernel against kernel, on one clock, with its own A/A floor ---------------------------------
REFERENCE, REFERENCE_AGAIN = "reference", "reference (again)"


def again(name: str) -> str:
    """The name of a reference's A/A copy: "reference" -> "reference (again)"."""
    return f"{name} (again)"


@dataclass
class CallComparison:
    """Calls timed in shuffled rounds against a reference call and the reference against itself."""
    ms: dict        # name -> median ms per call (the reference and its A/A copy included)
    ratios: dict    # name -> Ratio of its time to the reference's, round by round (the A/A copy's too)
    clock: str      # CLOCK_LABELS value: GPU time on a GPU, interpreter wall time in CPU mode
    rounds: int
    reference: str = REFERENCE  # the reference call's name; its A/A copy is ``again(reference)``

    @property
    def floor(self) -> Ratio:
        return self.ratios[again(self.reference)]

    def verdict(self, name: str) -> Verdict:
        """As ``Comparison.verdict``: the floor itself is judged against the minimum effect alone."""
        return verdict(self.ratios[name], None if name == again(self.reference) else self.floor)

    def between(self, a: str, b: str) -> Ratio:
        """``a``'s time over ``b``'s, round by round (above 1: ``a`` is slower): every call ran in every round,
        so it is the ratio of their ratios to the reference (the reference's own being 1)."""
        per_round = {n: [1.0] * self.rounds if n == self.reference else self.ratios[n].values for n in (a, b)}
        return Ratio.of([x / y for x, y in zip(per_round[a], per_round[b])])

    def record(self, name: str, id: str, note: str = "") -> Verdict:
        return _record_ratio(id, self.ratios[name], self.floor, self.verdict(name),
                             f"{self.clock}, median of {self.rounds} shuffled rounds", note)


CALL_CLOCKS = ("gpu", "host")  # compare_calls' clocks: CUDA-graph replay, or host time per call


def compare_calls(calls: dict, reference, rounds: int | None = None, seed: int = 0, clock: str = "gpu",
                  after_profile: bool = False, reference_name: str = REFERENCE) -> CallComparison:
    """Time each call in ``calls`` against ``reference``, in shuffled rounds, on one clock.

    Like ``compare_configs`` for kernels: every round times each call, the reference and the reference
    again (the A/A floor: what a ~2 µs kernel's GPU time does between two replays of the same graph) in a
    shuffled order. ``clock`` "gpu": GPU time (``ms_per_call``: CUDA-graph replay); "host": host time per
    call (``host_ms_per_call``: back to back, synchronised), the price of issuing the call. In CPU mode
    either clock is the interpreter's wall time. The host clock refuses to run once the process has
    profiled (``host_clock_free``) unless ``after_profile`` says that is known (an exercise at a chapter's
    end, comparing calls that launch alike): its clock label then says that CUPTI was attached.
    ``reference_name`` names the reference in the result (``REFERENCE`` unless given; its copy ``again(name)``).
    """
    rounds = env.SIZES.rounds_kernel if rounds is None else rounds
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if clock not in CALL_CLOCKS:
        raise ValueError(f"clock must be one of {CALL_CLOCKS}, got {clock!r}")
    pair = (reference_name, again(reference_name))
    if set(pair) & set(calls) or not calls:
        raise ValueError(f"calls: give at least one call, none named {sorted(pair)}")
    every = {pair[0]: reference, pair[1]: reference, **calls}
    for name, fn in every.items():
        if not callable(fn):
            raise TypeError(f"calls[{name!r}] must be a zero-argument callable, got {type(fn).__name__}")
    attached = clock == "host" and env.HAS_GPU and bool(timing_order.PROFILED_BY) and after_profile
    if clock == "host" and not after_profile:
        host_clock_free("compare_calls(clock='host')")
    time_one = ms_per_call if clock == "gpu" else loop_ms
    label = CLOCK_LABELS[clock if env.HAS_GPU else "interpreter"] + (", after a profile (CUPTI attached)" if attached else "")
    times = {name: [] for name in every}
    for r in range(rounds):
        for name in _shuffled(every, r, seed):
            times[name].append(time_one(every[name]))
    ratios = _ratios_to(times, reference_name)
    return CallComparison({name: statistics.median(ts) for name, ts in times.items()}, ratios, label, rounds,
                          reference_name)
