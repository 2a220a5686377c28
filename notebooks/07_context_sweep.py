# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 7: Does the slowdown hold as the context grows?
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/07_context_sweep.ipynb)
#
# In this chapter you will learn:
# - how the original and the fully custom model behave as the prompt gets longer;
# - how to split a generation into the prefill (the prompt, in one pass) and the rest (one token at a
#   time), and which of the two grows with the context;
# - how to read a trend from every point of a sweep, with the spread of each point, instead of from its
#   two ends.

# %% [markdown]
# ## The idea
#
# A generation has two phases with very different shapes.
#
# - **Prefill**: the whole prompt goes through the model in one forward pass. Its matmuls have as many
#   rows as the prompt has tokens, and attention compares every prompt token with every earlier one, so
#   its work grows with the prompt (attention's part quadratically). The number of kernels it launches
#   hardly depends on the prompt's length.
# - **Decode**: one token per step. Each step reads all the weights and the KV cache, which grows by one
#   token per step; the kernel count per step is fixed.
#
# We fix the number of new tokens and grow the prompt, with every custom kernel switched on. If the
# custom model's time is dominated by launches, its time should barely move with the context, while the
# parts of the original that do real work (the prefill above all) grow.
#
# Every point of the sweep is a `helpers.compare_configs` run: the original, the original again and the
# fully custom model, one greedy generation each per round, in shuffled order, for several rounds. Each
# round's custom time is divided by the original's time of the same round, so host noise that hits a
# round hits both; the original against itself (the A/A floor) says how large that noise is. Right after
# each generation, in the same round, the same model generates one token more from the same prompt: one
# forward pass over the prompt, the prefill alone. The prefill gets its own per-round ratios and its own
# A/A floor the same way.

# %%
# Setup: find the repository (or fetch it on a fresh Colab runtime), install what is missing.
# Written by tools/sync_notebooks.py from colab_setup.py: edit it there, not here.
import os, pathlib, subprocess, sys
REPO_URL = os.environ.get("SLOWER_REPO_URL", "https://github.com/slower-on-purpose/slower-on-purpose")
BRANCH = os.environ.get("SLOWER_BRANCH", "main")
ROOT = next((p for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
             if (p / "helpers.py").is_file() and (p / "slower_kernels").is_dir()), None)
if ROOT is None:  # the notebook came alone (Colab): clone the rest next to it
    ROOT = pathlib.Path("slower-on-purpose").resolve()
    if not ROOT.exists():
        done = subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", BRANCH, REPO_URL, str(ROOT)],
                              capture_output=True, text=True, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
        if done.returncode != 0:
            raise SystemExit(f"Could not clone {REPO_URL} (branch {BRANCH}): {done.stderr.strip()}\n"
                             "Is the address right and the repository public? A fork sets REPO_URL in "
                             "colab_setup.py (see the README), or SLOWER_REPO_URL before this cell.")
sys.path.insert(0, str(ROOT))
import colab_setup
colab_setup.prepare()

# %%
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import helpers

helpers.show_env()
SIZES = helpers.SIZES
ORIGINAL, CUSTOM = helpers.ORIGINAL, "all custom"  # all custom: two-pass RMSNorm, every projection, slow attention

model, tokenizer, description = helpers.load_model()
print(description)
N = SIZES.new_tokens_context
print(f"prompt lengths: {SIZES.context_prompts}; new tokens per generation: {N}; "
      f"rounds per prompt length: {SIZES.rounds_sweep}")

# %% [markdown]
# ## Predict
#
# - **Original, prefill**: more tokens per pass means more work; on a GPU a short prompt still leaves
#   most of the chip idle (and the host launching kernels sets the pace), so the growth should start
#   slowly and then pick up.
# - **Custom, prefill**: the same work, done by less efficient kernels, plus the attention loop launching
#   its kernels head by head whatever the length. It should also grow, from a higher floor.
# - **The rest of the generation** (one token per step): the KV cache gets longer, but at batch size 1
#   reading it is a small part of a step, so both models should stay nearly flat, the custom one far
#   above the original.
# - **The ratio** of the two generation times: the custom model's fixed launch cost per token is large,
#   while the original's prefill grows with the prompt; so if anything the ratio should shrink a little
#   as the prompt grows.
#
# tokens/s here is new tokens over the whole generation time, prefill included; no time per token is
# derived from it. The time per decoded token comes from the same rounds instead (`Comparison.decode_ms`):
# each round's generation minus its one-token generation, over the new tokens after the first.

# %%
runs = {}
for L in SIZES.context_prompts:
    print(f"prompt of {L} tokens: {N} new tokens per generation, each followed by 1 (the prefill alone)")
    runs[L] = helpers.compare_configs(model, {CUSTOM: helpers.ALL_CUSTOM}, prompt_len=L, new_tokens=N,
                                      rounds=SIZES.rounds_sweep, tokenizer=tokenizer)


def per_round(comparison, name, scale=1e3):
    """Median and quartiles of one configuration's per-round times (ms per generation by default)."""
    return helpers.Ratio.of([s * scale for s in comparison.seconds[name]])


def prefill_per_round(comparison, name):
    """Median and quartiles of one configuration's per-round prefill (its one-token generations), in ms."""
    return helpers.Ratio.of([s * 1e3 for s in comparison.first_seconds[name]])


def prefill_ratio(comparison, name):
    """Round by round, ``name``'s prefill over the original's prefill of the same round (above 1: slower)."""
    return helpers.Ratio.of([a / b for a, b in zip(comparison.first_seconds[name],
                                                   comparison.first_seconds[ORIGINAL])])


def tokens_per_s(comparison, name):
    """tokens/s (new tokens / generation time) of one configuration: the comparison's median, with the
    quartiles of the per-round values."""
    r = helpers.Ratio.of([comparison.new_tokens / s for s in comparison.seconds[name]])
    return helpers.Ratio(comparison.tokens_per_s[name], r.low, r.high, r.values)


def floor_text(floor):
    """A floor's median as ``Ratio.median_text`` writes it, but to 4 significant digits at least, as results.csv's
    tables show a recorded floor (1.005, not 1.01): the same floor reads alike in every cell and chapter."""
    text = floor.median_text
    if len(re.sub(r"\D", "", text).lstrip("0")) >= 4:
        return text
    return f"{floor.median:#.4g}".rstrip(".")


lengths = list(SIZES.context_prompts)
floors = {L: runs[L].floor for L in lengths}  # A/A floor of the whole generations
pre_floors = {L: prefill_ratio(runs[L], helpers.ORIGINAL_AGAIN) for L in lengths}  # A/A floor of the prefills
pre_ratios = {L: prefill_ratio(runs[L], CUSTOM) for L in lengths}
rows = []
for L in lengths:
    c = runs[L]
    ratio, floor, pre, pre_floor = c.ratios[CUSTOM], c.floor, pre_ratios[L], pre_floors[L]
    rows.append({"prompt": L,
                 "tokens/s original": c.tokens_per_s[ORIGINAL], "tokens/s custom": c.tokens_per_s[CUSTOM],
                 "time ratio (x slower)": ratio.median, "quartiles": ratio.quartiles,
                 "verdict": c.verdict(CUSTOM).text,
                 "A/A floor": floor.median, "A/A quartiles": floor.quartiles,
                 "prefill wall ms original": c.prefill_ms(ORIGINAL), "prefill wall ms custom": c.prefill_ms(CUSTOM),
                 "prefill ratio (x slower)": pre.median, "prefill quartiles": pre.quartiles,
                 "prefill verdict": helpers.verdict(pre, pre_floor).text,
                 "prefill A/A floor": pre_floor.median, "prefill A/A quartiles": pre_floor.quartiles})
table = pd.DataFrame(rows)
print(f"{N} new tokens per generation, median of {SIZES.rounds_sweep} shuffled rounds per prompt length; "
      "prefill wall ms: wall time of the one-token generation that follows each generation in the same round")
shown = table.copy()  # every median at its quartiles' digits (Ratio.median_text), a floor at 4 at least (floor_text)
for column, ratios_ in (("time ratio (x slower)", {L: runs[L].ratios[CUSTOM] for L in lengths}),
                        ("A/A floor", floors), ("prefill ratio (x slower)", pre_ratios),
                        ("prefill A/A floor", pre_floors)):
    shown[column] = [floor_text(ratios_[L]) if "floor" in column else ratios_[L].median_text for L in lengths]
helpers.show(shown)
helpers.save_sweep(table, "context_sweep")

for L in lengths:
    c = runs[L]
    note = f"prompt {L}, {N} new tokens"
    helpers.record(f"context.{L}.tps_original", c.tokens_per_s[ORIGINAL], "tokens/s",
                   f"{note}; median of {len(c.orders)} shuffled rounds, prefill included",
                   spread=tokens_per_s(c, ORIGINAL))
    helpers.record(f"context.{L}.tps_custom", c.tokens_per_s[CUSTOM], "tokens/s",
                   f"{note}, every custom kernel on; median of {len(c.orders)} shuffled rounds, prefill included",
                   spread=tokens_per_s(c, CUSTOM))
    c.record(CUSTOM, f"context.{L}.ratio", note)
    c.record(helpers.ORIGINAL_AGAIN, f"context.{L}.floor", note + "; the original against itself")
    for name, tag in ((ORIGINAL, "original"), (CUSTOM, "custom")):
        helpers.record(f"context.{L}.prefill_ms_{tag}", c.prefill_ms(name), "ms",
                       f"wall time of a one-token generation, prompt {L}, right after each {N}-token one; median of "
                       f"{len(c.orders)} shuffled rounds", spread=prefill_per_round(c, name))


def read_floors(runs, lengths, pre_floors):
    """What the sweep's A/A floors came out at with its few rounds, and what they do to its verdicts; then the
    prefill's own floors (``pre_floors``), judged by the same rule, and which of them the trend readings use."""
    rounds = len(runs[lengths[0]].orders)
    floors = {L: runs[L].floor for L in lengths}
    stood = {L: runs[L].verdict(helpers.ORIGINAL_AGAIN) for L in lengths}  # a floor against the 5% minimum alone
    noise = {L: runs[L].verdict(CUSTOM).noise for L in lengths}  # each point's threshold, widened by its floor
    real = [L for L in lengths if runs[L].verdict(CUSTOM).real]
    widest = max(noise.values())
    text = (f"Each prompt length ran {rounds} shuffled rounds"
            + (f", fewer than the {SIZES.rounds} of a single comparison elsewhere in the series: the series' time "
               f"budget does not allow more for {len(lengths)} lengths. " if rounds < SIZES.rounds else ". ")
            + "The original against itself came out at "
            + ", ".join(f"{L}: {floor_text(floors[L])} ({floors[L].quartiles})" for L in lengths)
            + ". ")
    out = [L for L in lengths if stood[L].real]
    held = [L for L in lengths if not stood[L].real]
    if held:  # the verdict's own reason: the 5% minimum, or quartiles on both sides of 1 (a 6% median can be noise)
        text += ("By the series' rule (`helpers.verdict`: a floor is judged against the minimum effect, "
                 f"{100 * helpers.noise_threshold():.0f}% from 1, and its own quartiles), the original was within "
                 "noise of itself at "
                 + "; ".join(f"{L} tokens ({held_reason(floors[L], stood[L])})" for L in held) + ". ")
    if out:
        text += (f"It came out {which_way([stood[L] for L in out])} than itself at "
                 + ", ".join(f"{L} tokens ({stood[L].text})" for L in out)
                 + f": with {rounds} rounds, the host's drift between two slots of one round is not averaged away. ")
    text += ("Each verdict widens its noise threshold to twice its own floor's distance from 1 (never under "
             f"{100 * helpers.MIN_EFFECT:.0f}%): " + ", ".join(f"{L}: {100 * noise[L]:.0f}%" for L in lengths)
             + ". " + threshold_against_spread(floors, noise)
             + f"The slowdown stood out of its threshold at {len(real)} of the {len(lengths)} lengths. A change of "
             f"the slowdown from one length to another has to clear thresholds like these (up to {100 * widest:.0f}% "
             "here) to count: the trend reading below holds a change from the first length to the last to the "
             "noisier end's floor, and a move between any two lengths to the noisier of their own floors where "
             "that is wider.")
    pre_stood = {L: helpers.verdict(pre_floors[L]) for L in lengths}
    text += ("\n\nThe prefill has its own A/A floors (the original's one-token generations against its own, round "
             "by round): " + "; ".join(f"{L}: {floor_text(pre_floors[L])} ({pre_floors[L].quartiles}), "
                                       f"{pre_stood[L].text}" for L in lengths) + ". ")
    pre_out = [L for L in lengths if pre_stood[L].real]
    if not pre_out:
        text += "By the series' rule the original's prefill was within noise of itself at every length."
    else:
        text += (f"So at {', '.join(str(L) for L in pre_out)} tokens the original's prefill came out "
                 f"{which_way([pre_stood[L] for L in pre_out])} than itself: the prefill points there carry that "
                 "much noise. ")
        inner = [L for L in pre_out if L not in (lengths[0], lengths[-1])]
        if inner:
            whose = "that floor's threshold" if len(inner) == 1 else "those floors' thresholds"
            text += (f"The trend readings below hold a move to or from {', '.join(str(L) for L in inner)} tokens "
                     f"to {whose} where wider than the ends' (each reading names such points), so a noisy point "
                     "inside the sweep cannot make a trend, or break one, on its own.")
    return text


def which_way(verdicts):
    """'slower', 'faster' or 'slower or faster': the direction(s) of real verdicts, for a sentence about them."""
    ways = sorted({"slower" if v.ratio > 1 else "faster" for v in verdicts}, reverse=True)
    return " or ".join(ways)


def threshold_against_spread(floors, noise):
    """A threshold is set by its floor's median alone: where the floor with the widest quartiles (in log terms) did
    not get the widest threshold, say so, since its verdicts are held to less than its floor's spread."""
    span = {L: float(np.log(f.high / f.low)) for L, f in floors.items()}
    widest = max(span, key=span.get)
    larger = [L for L in floors if noise[L] > noise[widest]]
    if not larger:
        return ""
    rank = ("the smallest" if all(noise[L] >= noise[widest] for L in floors) else
            f"smaller than at {len(larger)} of the other {len(floors) - 1} lengths")
    return (f"A threshold follows its floor's median, not its spread: at {widest} tokens the floor's quartiles "
            f"({floors[widest].quartiles}) are the widest of the sweep, yet its threshold ({100 * noise[widest]:.0f}%) "
            f"is {rank}, because its median ({floor_text(floors[widest])}) sits closer to 1 than theirs; the verdicts "
            "there are held to less than that floor's spread. ")


def held_reason(floor, v):
    """Why a floor was within noise, with the quartiles printed to enough digits and, where the quartile rule
    held it back, how many of the rounds fell on each side of 1."""
    if not v.reason.startswith("its quartiles"):
        return v.reason
    below = sum(x < 1 for x in floor.values)
    return (f"its quartiles ({floor.quartiles}) lie on both sides of 1; {below} of its "
            f"{len(floor.values)} rounds were below 1")


helpers.md(read_floors(runs, lengths, pre_floors))

# %% [markdown]
# ## Reading a trend from every point
#
# Four ratios, each with its own spread, can wander without any trend: a reading that compares the two
# ends alone would find one in noise. So the reading below (`read_trend`) uses every point. It says the
# ratio *grew* or *shrank* only when two things hold:
#
# - the medians move one way from the shortest prompt to the longest: no two lengths move against it by more
#   than the noise threshold (a smaller step back counts as level, and the reading names it). Two lengths
#   are held to the threshold of the noisier of their own A/A floors where that is wider than the ends', so
#   a noisy point inside the sweep cannot make a trend, or break one, on its own (the reading names it);
# - the change from the first point to the last is outside the noise by the series' one rule,
#   `helpers.verdict`, applied to the ratio of the two (last over first) with the widest quartiles the
#   two allow (the last's lower quartile over the first's upper one, and the reverse), against the
#   noisier of the two runs' A/A floors.
#
# Otherwise the reading is "no consistent trend", and it says why: the quartiles leave room for no
# change at all (within the per-round spread), the change is smaller than what the series counts as
# noise, or the points do not move one way. The same reading is applied to each model's generation and
# prefill times, to the prefill ratio and to each model's wall ms per decoded token; the prefill readings
# are judged against the prefill's own A/A floors (the original's one-token generations against its own,
# round by round, shown in the table above), the decode readings against the decode's
# (`Comparison.decode_ratio` of the original against itself).
#
# One caution before reading them: the prompt lengths ran one after another, each its own comparison. A
# ratio is taken within each round and cancels a host that drifts over the minutes of the sweep; an
# absolute time does not, so its reading says "with the prompt length (or with the host's drift)", and
# the paragraph after the readings says which of the two the numbers point to, where any absolute time moved.

# %%
read_trend, read_together = helpers.read_trend, helpers.read_together  # one reading, shared with chapter 8

WALL = "wall ms"  # the clock of every time in this chapter: wall time of whole generations
# An absolute time moves with the prompt length and with the host's drift between the lengths' comparisons,
# which ran one after another: its reading names both. A ratio, taken within each round, cancels the drift.
SWEEP = "the prompt length (or with the host's drift: the lengths ran one after another)"
series = {  # quantity -> ({prompt length: median and quartiles of the rounds}, the A/A floors it is judged against)
    "time ratio, all custom / original": ({L: runs[L].ratios[CUSTOM] for L in lengths}, floors),
    "generation wall ms, original": ({L: per_round(runs[L], ORIGINAL) for L in lengths}, floors),
    "generation wall ms, all custom": ({L: per_round(runs[L], CUSTOM) for L in lengths}, floors),
    "prefill ratio, all custom / original": (pre_ratios, pre_floors),
    "prefill wall ms, original": ({L: prefill_per_round(runs[L], ORIGINAL) for L in lengths}, pre_floors),
    "prefill wall ms, all custom": ({L: prefill_per_round(runs[L], CUSTOM) for L in lengths}, pre_floors),
}
# The rest of the generation, per decoded token (Comparison.decode_ms: each round's generation minus its
# one-token generation, over the new tokens after the first), with its own A/A floor (Comparison.decode_ratio).
# On a tiny CPU-mode model the difference can drown in timing noise (a median at or below zero): no reading then.
dec_floors = {L: runs[L].decode_ratio(helpers.ORIGINAL_AGAIN) for L in lengths}
decodable = all(runs[L].decode_ms(name).median > 0 for L in lengths for name in (ORIGINAL, CUSTOM))
if decodable:
    series["wall ms per decoded token, original"] = ({L: runs[L].decode_ms(ORIGINAL) for L in lengths}, dec_floors)
    series["wall ms per decoded token, all custom"] = ({L: runs[L].decode_ms(CUSTOM) for L in lengths}, dec_floors)
trends = {q: read_trend(points, fl, WALL, SWEEP) if WALL in q else read_trend(points, fl)
          for q, (points, fl) in series.items()}
dec_verdicts = {L: helpers.verdict(runs[L].decode_ratio(CUSTOM), dec_floors[L]) for L in lengths} if decodable else {}
helpers.show(pd.DataFrame([
    {"quantity": q, "median at each prompt length": t.points, "last / first": t.change.median_text,
     "quartile bounds": t.change.quartiles, "noise threshold (ends)": f"{100 * t.verdict.noise:.0f}%",
     "verdict (last / first)": t.verdict.text, "reading": t.word} for q, t in trends.items()]))
ratio_trend = trends["time ratio, all custom / original"]
gen_o, gen_c = trends["generation wall ms, original"], trends["generation wall ms, all custom"]
pre_o, pre_c = trends["prefill wall ms, original"], trends["prefill wall ms, all custom"]
pre_trend = trends["prefill ratio, all custom / original"]
floor_words = lambda fl: ", ".join(f"{L}: {floor_text(fl[L])} ({fl[L].quartiles})" for L in lengths)


def two_statistics():
    """The per-token verdicts read medians of per-round ratios; the table's medians divided give another statistic.
    Quotes the length where the two differ most."""
    quotient = {L: runs[L].decode_ms(CUSTOM).median / runs[L].decode_ms(ORIGINAL).median for L in lengths}
    both = [L for L in lengths if runs[L].decode_ratio(CUSTOM).median > 0]  # a noisy CPU round can go below zero
    if not both:
        return ""
    at = max(both, key=lambda L: abs(np.log(quotient[L] / runs[L].decode_ratio(CUSTOM).median)))
    q = f"{quotient[at]:.0f}" if quotient[at] >= 1000 else f"{quotient[at]:#.3g}".rstrip(".")
    return (f"Those verdicts read the median of each round's ratio, a different statistic from a quotient of the two "
            f"medians in the trend table (at {at} tokens, {q} against a median ratio of "
            f"{runs[at].decode_ratio(CUSTOM).median_text}): the host drifts between rounds, and only the per-round "
            "ratio cancels the drift.")


helpers.md(
    f"**The ratio.** From a {lengths[0]}-token to a {lengths[-1]}-token prompt, the all-custom model's time over "
    f"the original's **{ratio_trend.text}**. Every point: {ratio_trend.points}; the verdict at each length, "
    f"against that run's A/A floor: {', '.join(f'{L}: {runs[L].verdict(CUSTOM).text}' for L in lengths)} "
    f"(A/A floors, median and quartiles: {floor_words(floors)}).\n\n"
    f"**Each model's generation time** ({N} new tokens, prefill included): the original's {gen_o.text}; "
    f"the custom model's {gen_c.text}: {read_together(gen_o, gen_c)}.\n\n"
    f"**The prefill alone** (the one-token generations): the original's {pre_o.text}; the custom model's "
    f"{pre_c.text}: {read_together(pre_o, pre_c)}. The prefill ratio, custom over original, {pre_trend.text}. "
    f"The prefill's own A/A floors (the original's one-token generations against its own, round by round): "
    f"{floor_words(pre_floors)}."
    + (f"\n\n**Per decoded token** (the rest of the generation): the original's "
       f"{trends['wall ms per decoded token, original'].text}; the custom model's "
       f"{trends['wall ms per decoded token, all custom'].text}. The custom model over the original, per decoded "
       f"token, against each run's decode A/A floor: {', '.join(f'{L}: {v.text}' for L, v in dec_verdicts.items())} "
       "(decode A/A floors, the original's wall ms per decoded token against its own, median and quartiles: "
       f"{floor_words(dec_floors)}). "
       + two_statistics() if decodable else
       "\n\n**Per decoded token**: the decode steps were too short to isolate from timing noise in this run (a "
       "median at or below zero), so there is no reading of them.")
    + ("" if helpers.HAS_GPU else "\n\nCPU mode: interpreter times on a tiny model and short prompts, "
       "good for following the method, not for conclusions about a GPU.")
)


def read_drift(series, trends, lengths):
    """Context or drift? The absolute times of a sweep whose lengths ran one after another move with either.
    Names the readings that moved, by how much in all and in their largest step between neighbouring lengths
    (in wall ms: a step can be larger than the whole change when another step went the other way), and whether
    the original's prefill, where a longer context costs the most work, moved with them."""
    text = ("**Context or drift?** Each prompt length was its own comparison, run one after another ("
            + ", ".join(str(L) for L in lengths) + " tokens, in that order). The A/A floors measure the noise "
            "inside each comparison, between two slots of one round; nothing in the sweep measures how far the "
            "host drifted from one comparison to the next, and such a drift moves every absolute time just as a "
            "longer context would. Only the ratios, taken within each round, cancel it. ")
    moved = [q for q, t in trends.items() if WALL in q and t.word != "no consistent trend"]
    if not moved:
        return text + "Here no absolute time moved consistently along the sweep, so there is nothing to tell apart."
    parts = []
    for q in moved:
        med = [series[q][0][L].median for L in lengths]
        i = max(range(len(med) - 1), key=lambda j: abs(med[j + 1] / med[j] - 1))
        total, step = med[-1] - med[0], med[i + 1] - med[i]
        part = (f"the {q} {trends[q].word} from {med[0]:.1f} to {med[-1]:.1f} {WALL} ({total:+.1f} {WALL} in all); "
                f"its largest step was from {lengths[i]} to {lengths[i + 1]} tokens ({med[i]:.1f} to {med[i + 1]:.1f} "
                f"{WALL}, {step:+.1f})")
        if step * total < 0:
            part += ", against the overall direction"
        elif abs(step) > abs(total):
            part += ", more than the whole change, because another step went the other way"
        parts.append(part)
    text += "Of the absolute times, " + "; ".join(parts) + ". "
    pre = trends["prefill wall ms, original"]
    if drift_hinted(trends):
        text += ("The original's prefill, which does far more context work per pass than a decode step (every "
                 f"prompt token against every earlier one), {pre.text}: a context effect would show there first, "
                 "so this pattern hints at drift rather than context (a hint only: see the step-by-step check "
                 "below). ")
    text += "Read the absolute times as moving along the sweep, and the ratios as the finding about context."
    return text


def drift_hinted(trends):
    """Whether ``read_drift`` points to drift: an absolute time of the original other than its prefill moved
    along the sweep while the original's prefill did not grow."""
    moved = [q for q, t in trends.items() if WALL in q and t.word != "no consistent trend"]
    return (trends["prefill wall ms, original"].word != "grew"
            and any(q != "prefill wall ms, original" and "original" in q for q in moved))


helpers.md(read_drift(series, trends, lengths))

# %% [markdown]
# A caution on any drift reading just above (where one is made). It leans on the original's prefill not
# growing, whether its reading is "no consistent trend" or "shrank", and neither says the prefill stood
# still: "no consistent trend" can be a median that moved while the rounds spread too widely to call it,
# and a prefill that shrank moved too, by drift if not by context (see *prefill wall ms, original* in the
# trend table: its median at each length, and its quartile bounds). Set that row's medians beside those of
# *wall ms per decoded token, original*, step by step, and mind the direction. A longer prompt is more
# work, never less: where both medians fell at the same step to a longer prompt, the context cannot be the
# cause, and the fall points to the host's drift (or to noise). Where both rose at the same step by about
# as much, this sweep cannot tell drift from context, and a reading that points to drift is a hint, not a
# finding. Where the prefill's median stayed flat while the decode times moved, the reading carries more
# weight. The one test that separates the two is to run the lengths again in another order (longest
# first): drift follows the clock, a context effect follows the length.

# %%
def moved_together():
    """The original's prefill from the first length to the last, and the steps between neighbouring lengths where
    it and the original's wall ms per decoded token both moved the same way by helpers.MIN_EFFECT or more, read by
    direction: a joint fall at a longer prompt points to drift (a longer context only adds work); at a joint rise
    drift and context cannot be told apart."""
    pre = [series["prefill wall ms, original"][0][L].median for L in lengths]
    text = (f"In this run the original's prefill came to {pre_o.change.median_text}x last over first ({lengths[0]} to "
            f"{lengths[-1]} tokens), and {pre_o.text}. ")
    if not decodable:
        return text + "There is no per-token decode reading to set beside it."
    dec = [series["wall ms per decoded token, original"][0][L].median for L in lengths]
    same = [i for i in range(len(lengths) - 1)
            if (pre[i + 1] / pre[i] - 1) * (dec[i + 1] / dec[i] - 1) > 0
            and min(abs(pre[i + 1] / pre[i] - 1), abs(dec[i + 1] / dec[i] - 1)) >= helpers.MIN_EFFECT]
    if not same:
        return text + (f"No step moved both it and the per-token decode time the same way by "
                       f"{100 * helpers.MIN_EFFECT:.0f}% or more.")
    steps = lambda ids: "; ".join(f"{lengths[i]} to {lengths[i + 1]} tokens (prefill {pre[i]:.1f} to {pre[i + 1]:.1f}, "
                                  f"per decoded token {dec[i]:.1f} to {dec[i + 1]:.1f} {WALL})" for i in ids)
    at = lambda ids: "that step" if len(ids) == 1 else "those steps"
    fell, rose = [i for i in same if pre[i + 1] < pre[i]], [i for i in same if pre[i + 1] > pre[i]]
    if fell:
        text += (f"Both fell by {100 * helpers.MIN_EFFECT:.0f}% or more from {steps(fell)}: a longer prompt is more "
                 f"work, never less, so at {at(fell)} the joint fall points to the host's drift between the "
                 "comparisons (or to noise), not to the context. ")
    if rose:
        text += (f"Both rose by {100 * helpers.MIN_EFFECT:.0f}% or more from {steps(rose)}: at {at(rose)} drift and "
                 "context cannot be told apart"
                 + (", and the drift reading above is a hint, not a finding." if drift_hinted(trends) else "."))
    return text.rstrip()


helpers.md(moved_together())

# %%
fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.5))


def errorbars(ax, points, label, **style):
    """Medians with their quartiles as error bars, one point per prompt length."""
    med = [points[L].median for L in lengths]
    # clipped at 0: a median of tokens/s taken over the times (the comparison's) may sit outside the quartiles
    # of the per-round tokens/s when there are few rounds
    err = [[max(0.0, m - points[L].low) for L, m in zip(lengths, med)],
           [max(0.0, points[L].high - m) for L, m in zip(lengths, med)]]
    ax.errorbar(lengths, med, yerr=err, capsize=4, label=label, **style)


def bracket_log_ticks(ax, values):
    """A log y axis whose labelled ticks bracket ``values``: ticks at 1, 1.5, 2, 3, 5 and 7 times the powers of
    ten (1, 2 and 5 beyond 1.2 decades, powers of ten beyond 4), from the one at or below the smallest value to
    the one at or above the largest, and the axis limits on those two: no point sits beyond the last label."""
    lo, hi = min(v for v in values if v > 0), max(values)
    decades = np.log10(hi / lo)
    mantissas = (1, 1.5, 2, 3, 5, 7) if decades < 1.2 else (1, 2, 5) if decades <= 4 else (1,)
    powers = range(int(np.floor(np.log10(lo))) - 1, int(np.ceil(np.log10(hi))) + 2)
    nice = sorted(m * 10.0 ** k for k in powers for m in mantissas)
    bottom, top = max(t for t in nice if t <= lo), min(t for t in nice if t >= hi)
    ax.set_ylim(bottom, top)
    helpers.plain_log_ticks(ax, "y", [t for t in nice if bottom <= t <= top])


errorbars(ax1, {L: runs[L].ratios[CUSTOM] for L in lengths}, "all custom / original", marker="s",
          color="tab:red")
errorbars(ax1, floors, "original / original (A/A floor)", marker="o", color="gray")
ax1.axhline(1, color="black", linewidth=0.8)
ax1.set_ylabel("time ratio to the original (x slower)")
ax1.set_title("Does the slowdown hold as the prompt grows?")
ax1.set_ylim(bottom=0)
for name, marker, color in ((ORIGINAL, "o", "tab:blue"), (CUSTOM, "s", "tab:red")):
    errorbars(ax2, {L: tokens_per_s(runs[L], name) for L in lengths}, name, marker=marker, color=color)
    errorbars(ax3, {L: prefill_per_round(runs[L], name) for L in lengths}, f"prefill, {name}", marker=marker,
              color=color)
ax2.set_ylabel("tokens/s (new tokens / generation time, prefill included)")
ax2.set_title(f"tokens/s, {N} new tokens")
ax2.set_ylim(bottom=0)
ax3.set_yscale("log")
bracket_log_ticks(ax3, [v for name in (ORIGINAL, CUSTOM) for L in lengths
                        for v in (prefill_per_round(runs[L], name).low, prefill_per_round(runs[L], name).high)])
ax3.set_ylabel("prefill, wall ms per generation of one token")
ax3.set_title("The prefill alone, as the prompt grows")
for ax in (ax1, ax2, ax3):
    ax.set_xscale("log", base=2)
    helpers.plain_log_ticks(ax, "x", lengths)
    ax.set_xlabel("prompt length (tokens)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle(f"median of {SIZES.rounds_sweep} shuffled rounds per point; error bars: the middle half of the rounds",
             fontsize=9)
helpers.save_figure(fig, "context_sweep")
plt.show()

# %% [markdown]
# ## How much of a generation is prefill?
#
# The ratio of generation times mixes the two phases. Splitting each model's generation time (median of
# its rounds) into the prefill (median of the one-token generations of the same rounds) and the rest shows
# which phase carries the custom model's extra time, and whether that changes with the prompt. A
# difference of two medians is not the median of the differences, so the split is approximate; the rest is
# a time per generation (all the new tokens after the first), not a time per token.

# %%
split = pd.DataFrame({"prompt": lengths})
for name, tag in ((ORIGINAL, "original"), (CUSTOM, "custom")):
    split[f"generation wall ms {tag}"] = [per_round(runs[L], name).median for L in lengths]
    split[f"prefill wall ms {tag}"] = [runs[L].prefill_ms(name) for L in lengths]
    split[f"rest wall ms {tag}"] = split[f"generation wall ms {tag}"] - split[f"prefill wall ms {tag}"]
split["extra wall ms (custom - original)"] = split["generation wall ms custom"] - split["generation wall ms original"]
split["extra in prefill %"] = 100 * (split["prefill wall ms custom"] - split["prefill wall ms original"]) / split[
    "extra wall ms (custom - original)"]
split["prefill share of a generation %, original"] = (100 * split["prefill wall ms original"]
                                                      / split["generation wall ms original"])
split["prefill share of a generation %, custom"] = (100 * split["prefill wall ms custom"]
                                                    / split["generation wall ms custom"])
print(f"wall ms per generation of {N} new tokens (medians of the rounds); rest = generation - prefill")
helpers.show(split.astype({c: object for c in split.columns[1:]}).apply(
    lambda col: col if col.name == "prompt" else col.map(lambda v: f"{v:.1f}")))  # one decimal in every column
first, last = split.iloc[0], split.iloc[-1]
helpers.md(
    f"At {lengths[0]} prompt tokens the prefill was {first['prefill share of a generation %, original']:.1f}% of "
    f"the original's generation time and {first['prefill share of a generation %, custom']:.1f}% of the custom "
    f"model's; at {lengths[-1]}, {last['prefill share of a generation %, original']:.1f}% and "
    f"{last['prefill share of a generation %, custom']:.1f}%. Of the custom model's extra time per generation "
    f"({first['extra wall ms (custom - original)']:.1f} wall ms at {lengths[0]} tokens, "
    f"{last['extra wall ms (custom - original)']:.1f} wall ms at {lengths[-1]}), the prefill carried "
    f"{first['extra in prefill %']:.1f}% and {last['extra in prefill %']:.1f}%; the rest was spent in the "
    f"{N - 1} one-token steps after it. (Their kernel count does not depend on the context by construction: "
    "every kernel covers the whole KV cache in one launch, and the attention loop runs once per query head. "
    f"Chapter 6 counted the launches at a {SIZES.prompt_len}-token prompt; this chapter profiles none.)"
)

# %% [markdown]
# ## Beside the blog's T4 numbers
#
# The blog swept prompts of 128 to 1024 tokens with 32 new tokens and gave its ratios as a range rather
# than a table, so the comparison below puts your range next to its range.

# %%
side = helpers.compare("context.")
side = side[~side["id"].str.contains("{", regex=False)]  # the catalogue's pattern rows are not results


def natural(text):
    """Sort key that orders numbers by value: context.128 before context.1024."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


helpers.show(side.iloc[sorted(range(len(side)), key=lambda i: natural(side["id"].iloc[i]))].reset_index(drop=True))
blog_range = helpers.blog("context.ratio_range")
print("the blog's note on its sweep:", helpers.blog_numbers().set_index("id").loc["context.ratio_range", "note"])
ratios = table["time ratio (x slower)"]
helpers.md(
    f"The blog's T4 ratios spanned {blog_range}x across its sweep (its note above says how they moved). Your "
    f"ratios spanned {ratios.min():.2f}x to {ratios.max():.2f}x (the sweep's first table), and read from every "
    f"point they {ratio_trend.text}."
    + ("" if helpers.HAS_GPU else " CPU mode: interpreter times, on a tiny model and short prompts.")
)

# %% [markdown]
# ## Takeaway
#
# The readings below come from `read_trend` on this run's numbers (the table under "Reading a trend from
# every point"), set beside the predictions made before the measurement.

# %%
FLAT = "flat"  # no consistent trend, every two points within the noise threshold (or a noisier point's own) of each other
MOVED_BOTH_WAYS = "moved both ways"  # no consistent trend: a rise and a fall beyond the noise threshold
UNCLEAR = "moved, no clear trend"  # no consistent trend, but not flat either


def trend_word(t):
    """A trend as the judge table words it: read_trend's "grew" or "shrank", and its "no consistent trend" split
    into a flat line, one that moved both ways beyond the noise, and one that moved less clearly (no flat
    prediction survives the last two)."""
    if t.word != "no consistent trend":
        return t.word
    return FLAT if t.flat else MOVED_BOTH_WAYS if t.both_ways else UNCLEAR


def judge_predictions():
    """The Predict section's expectations against this run's readings: one row each."""
    expected = {  # what the Predict section expected, as read_trend would word it ("flat": Trend.flat)
        "prefill wall ms, original": "grew", "prefill wall ms, all custom": "grew",
        "wall ms per decoded token, original": FLAT,
        "wall ms per decoded token, all custom": FLAT,
        "time ratio, all custom / original": "shrank",
    }
    rows = []
    for q, w in expected.items():
        if q in trends:
            measured = trend_word(trends[q])
            rows.append({"quantity": q, "predicted": w, "measured": measured,
                         "prediction held": "yes" if measured == w else "no"})
        else:
            rows.append({"quantity": q, "predicted": w, "measured": "-", "prediction held": "not judged (no reading)"})
    if dec_verdicts:
        slower = [L for L, v in dec_verdicts.items() if v.real and v.ratio > 1]
        rows.append({"quantity": "wall ms per decoded token, all custom / original",
                     "predicted": "slower at every length",
                     "measured": f"slower at {len(slower)} of {len(dec_verdicts)}",
                     "prediction held": "yes" if len(slower) == len(dec_verdicts) else "no"})
    return pd.DataFrame(rows)


judged = judge_predictions()
helpers.show(judged)
held = judged["prediction held"] == "yes"
helpers.md(f"{int(held.sum())} of the {int(judged['prediction held'].isin(['yes', 'no']).sum())} predictions that "
           f"this run can judge held (\"{FLAT}\": every two lengths within the noise threshold of each other, or "
           "within a noisier point's own wider threshold, named in its reading; "
           f"\"{MOVED_BOTH_WAYS}\": a rise and a fall beyond it; "
           f"\"{UNCLEAR}\": neither flat nor one way).")


def explain_misses(judged):
    """A sentence for each missed prediction outside the prefill (the prefill's is read in the takeaway below):
    the per-token time of either model, from the drift reading; the ratio, from how small a part of a
    generation the prefill is (the split table)."""
    missed = set(judged.loc[judged["prediction held"] == "no", "quantity"])
    words = {FLAT: "stayed flat", MOVED_BOTH_WAYS: "moved both ways", UNCLEAR: "moved with no clear trend"}
    verb = lambda t: words.get(trend_word(t), trend_word(t))  # the judge table's word, as a verb
    out = []
    for q in ("wall ms per decoded token, original", "wall ms per decoded token, all custom"):
        if q not in missed:
            continue
        t = trends[q]
        if trend_word(t) == MOVED_BOTH_WAYS:
            out.append(f"*{q}* moved both ways, a rise and a fall by more than its noise threshold "
                       f"({100 * t.verdict.noise:.0f}%), where it was predicted to stay flat ({t.points}). More "
                       "context should not make a decode step cheaper, so a fall and a rise along the sweep point to "
                       "the host's drift between the lengths, which these absolute times carry (see *Context or "
                       "drift?* above) and the per-round ratios cancel.")
        else:
            out.append(f"*{q}* {verb(t)}, against the prediction: a decode step's context work is small at "
                       "batch size 1, and these absolute times also carry the host's drift between the lengths "
                       "(see *Context or drift?* above), which this sweep cannot separate from the context.")
    if "time ratio, all custom / original" in missed:
        share = split["prefill share of a generation %, original"].max()
        noise = ratio_trend.verdict.noise
        out.append(f"*The ratio* {verb(ratio_trend)} where it was predicted to shrink. The prediction rested on the "
                   f"original's prefill growing, but the prefill was at most {share:.1f}% of the original's "
                   "generation time: even had it doubled from the shortest prompt to the longest, the ratio would "
                   f"have shrunk by about {share:.1f}% at most, "
                   + (f"inside the noise threshold of the ratio's reading ({100 * noise:.0f}%): at these lengths the "
                      "prediction could not have been seen." if share / 100 < noise else
                      f"beyond the ratio's noise threshold ({100 * noise:.0f}%), had the prefill grown that much; "
                      f"it {verb(pre_o)}."))
    return " ".join(out)


if explain_misses(judged):
    helpers.md(explain_misses(judged))
def prefill_against_decode(launch_bound_only=False):
    """The original's prefill at the longest prompt set beside one of its decoded tokens at that length, both wall
    ms from the same rounds: when one pass over the whole prompt costs about what a pass over one token does, the
    prefill is paced by its launches (the same kernels at every length), not by its work. '' without a decode
    reading, and with ``launch_bound_only`` where the prefill took more than two decoded tokens. The two medians
    are judged against the noisier of the prefill's and the decode's A/A floors at that length, as a trend reading
    is against the noisier end's."""
    if not decodable:
        return ""
    pre, dec = runs[long_prompt].prefill_ms(ORIGINAL), runs[long_prompt].decode_ms(ORIGINAL).median
    floor = helpers.noisier_floor((pre_floors[long_prompt], dec_floors[long_prompt]))
    name = "prefill" if floor is pre_floors[long_prompt] else "per decoded token"
    v = helpers.verdict(pre / dec, floor)
    text = (f" At {long_prompt} prompt tokens the original's prefill took {pre:.1f} {WALL}, against {dec:.1f} {WALL} "
            "for one of its decoded tokens; judged against the noisier of the two A/A floors at that length "
            f"({name}, {floor_text(floor)}: a threshold of {100 * v.noise:.0f}%), the prefill came out ")
    if pre / dec < 2:
        return text + (("within noise, about what a pass over one token costs" if not v.real else
                        f"{v.text} than one decoded token" + (", but not twice as long" if v.ratio > 1 else ""))
                       + ", so the prefill's wall time is set mostly by the kernels it launches, the same number at "
                       "every length, and its growing work hides behind them.")
    if launch_bound_only:
        return ""
    if not v.real:  # a floor this far from 1 holds even a doubling back
        return text + ("within noise of one decoded token, though twice as long or more: at the longest prompt its "
                       "work may show in its wall time, but this run's noise cannot say.")
    return text + (f"{v.text} than one decoded token, twice as long or more: at the longest prompt its work, not "
                   "its launches alone, shows in its wall time.")


long_prompt = lengths[-1]
if pre_o.word == "grew":
    prefill_words = (f"The original's prefill {pre_o.text}: a longer context costs the prefill the most work, so this "
                     "is where it would show, though drift between the lengths can move it too (see *Context or "
                     "drift?* above).")
elif pre_o.word == "shrank":
    prefill_words = (f"Against the prediction that it would grow, the original's prefill {pre_o.text}. In this run a "
                     "longer prompt did not cost more wall time." + prefill_against_decode()
                     + " A longer prompt is more work, never less, so the fall itself points to the host's drift "
                     "between the lengths (see *Context or drift?* above).")
else:
    prefill_words = (f"Against the prediction that it would grow, the original's prefill {pre_o.text}; the prefill's "
                     f"A/A floors: {floor_words(pre_floors)}. "
                     "Its work grows with the prompt, but its kernel count does not; for its wall time to follow, "
                     "the extra work has to outweigh the time spent launching, and over these lengths the series' "
                     "rule found no growth it could tell from noise." + prefill_against_decode(launch_bound_only=True))
helpers.md(
    f"- **Prefill.** {prefill_words} "
    + ("The custom model's prefill" if pre_c.word == "grew" else
       "Against the prediction that it would grow, the custom model's prefill")
    + f" {pre_c.text}; {read_together(pre_o, pre_c)}.\n"
    f"- **The slowdown.** The all-custom model's time over the original's {ratio_trend.text}; each model's "
    f"generation time: {read_together(gen_o, gen_c)}. The custom kernels add a fixed number of launches to every "
    f"step, whatever the context (by construction; chapter 6 counted them at a {SIZES.prompt_len}-token prompt); "
    "the split above shows how much of each generation the prefill carried.\n"
    "- **Reading a sweep.** A trend needs every point, each point's spread and the A/A floor of its run: two "
    "ends can differ by noise alone. Read the ratio together with the prefill and the rest of the generation: "
    "they say which phase moved it."
    + ("" if helpers.HAS_GPU else "\n\nCPU mode: interpreter times on a tiny model and short prompts.")
)

# %% [markdown]
# Chapter 8 gathers every number of the series into one table and reads the lessons off it.
#
# ## Try it yourself
#
# Each exercise changes **one** thing in a single attention call, the part of the model whose work grows
# with the context, and times it with `helpers.compare_calls`: both calls in shuffled rounds, the
# reference against itself as the A/A floor. On a GPU the clock is **GPU time** (CUDA-graph replay): the
# host's launches are left out, so unlike the sweep above, these answers are about the GPU's work alone.
# In CPU mode the clock is the interpreter's wall time. The shapes are this model's heads at the sweep's
# shortest and longest prompts. Set `answer` to your guess and run the cell.

# %%
import torch
import torch.nn.functional as F

import slower_kernels

hq, hkv, d = model.config.num_attention_heads, model.config.num_key_value_heads, model.config.head_dim
short, long = lengths[0], lengths[-1]


def qkv(queries, keys, heads=hq, kv_heads=hkv):
    """Random q [1, heads, queries, D] and k, v [1, kv_heads, keys, D] on the model's device and dtype."""
    shape = lambda h, n: (1, h, n, d)
    return tuple(torch.randn(*shape(h, n), device=helpers.DEVICE, dtype=helpers.DTYPE)
                 for h, n in ((heads, queries), (kv_heads, keys), (kv_heads, keys)))


# %% [markdown]
# **1. A decode step at a longer context.** Our per-head loop for one new token, against the keys of the
# shortest prompt, then of the longest (8 times as many at full size). Per query head, the loop's matmuls
# now read that many more keys and values (at 1,024 keys, 256 KB each of K and V for one key/value head in
# float16), and the product of the probabilities with V walks the keys tile after tile inside a few
# programs, so its GPU time grows with them. But every kernel also has a fixed cost of starting and
# finishing, whatever it reads (chapter 5's GPU time for this loop over its launch count comes to a few µs
# per kernel), and that part does not grow. Expect **slower**, clearly, but by far less than 8 times. (In
# the sweep above the host's launches set the pace of a decode step, so growth on the GPU's clock can stay
# hidden behind them there; this exercise takes the host away.)

# %%
answer = None  # your guess: "faster", "slower" or "same"
at_short, at_long = qkv(1, short), qkv(1, long)
cmp = helpers.compare_calls({"longer context": lambda: slower_kernels.attention_slow(*at_long, scale=d ** -0.5, causal=True)},
                            reference=lambda: slower_kernels.attention_slow(*at_short, scale=d ** -0.5, causal=True))
measured = helpers.check_answer(answer, cmp.ratios["longer context"], cmp.floor,
                     change=f"per-head loop, one query, {long} keys instead of {short}", clock=cmp.clock)

# %% [markdown]
# **2. The original's prefill attention at a longer prompt.** PyTorch's fused
# `scaled_dot_product_attention` (SDPA, the original's attention, as in
# [chapter 5](05_attention.ipynb)) over the whole prompt, causal, at the shortest prompt and at the
# longest: every token against every earlier one, so the work grows with the square of the length (64
# times at full size, 8 times as many tokens). In the sweep the original's prefill is a whole forward
# pass, each of its kernels launched by the host (chapter 6 counts the kernels of a decode step, the same
# forward pass over one token); this call is one kernel, so only the GPU's work is left. Expect **slower**,
# but by far less than the work: at the shortest prompt the kernel is mostly its fixed cost of starting and
# finishing, with only a few tiles of queries to
# spread over the GPU's many multiprocessors (132 on an H200, 40 on a T4), most of them idle; the tiles of
# a longer prompt first fill those idle multiprocessors side by side. The smaller the GPU, the sooner
# the tiles queue up and the more of the work shows.

# %%
answer = None  # your guess: "faster", "slower" or "same"
pre_short, pre_long = qkv(short, short), qkv(long, long)
sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hq != hkv)
cmp = helpers.compare_calls({"longer prompt": lambda: sdpa(*pre_long)}, reference=lambda: sdpa(*pre_short))
measured = helpers.check_answer(answer, cmp.ratios["longer prompt"], cmp.floor,
                     change=f"SDPA prefill over {long} tokens instead of {short}", clock=cmp.clock)

# %% [markdown]
# **3. Half the heads looped.** The per-head loop at the longest context, over all the query heads, then
# over half of them (with half the key/value heads, so the grouping stays the same). Its kernel count is 3
# per head; each kernel is small. Expect **faster**, close to half the time: half the heads is half the
# kernels and half the work. On an H200 each of these kernels is so small that its GPU time is mostly its
# fixed cost of starting and finishing, so the time follows the kernel count; on a smaller GPU such as a T4
# the work weighs in more, but it halves too. Either way the ratio should land near 0.5x.

# %%
answer = None  # your guess: "faster", "slower" or "same"
half = qkv(1, long, hq // 2, max(1, hkv // 2))
cmp = helpers.compare_calls({"half the heads": lambda: slower_kernels.attention_slow(*half, scale=d ** -0.5, causal=True)},
                            reference=lambda: slower_kernels.attention_slow(*at_long, scale=d ** -0.5, causal=True))
measured = helpers.check_answer(answer, cmp.ratios["half the heads"], cmp.floor,
                     change=f"per-head loop over {hq // 2} query heads instead of {hq}, {long} keys", clock=cmp.clock)
