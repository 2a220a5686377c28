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
# # Chapter 6: Everything custom at once
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/06_full_stack.ipynb)
#
# In this chapter you will learn:
# - how to run Qwen3-0.6B with every RMSNorm, every linear projection and every attention module on
#   our own Triton kernels, and check that it still computes the same function;
# - how much slower the fully custom model generates, measured in interleaved rounds against the original's
#   own run-to-run noise, and why, in launches, GPU-busy time and wall time per token;
# - whether and why the custom model's greedy output differs from the original's, and how small the
#   difference that flips a token can be;
# - why the order of floating-point additions changes results, and why that is not a bug.

# %% [markdown]
# ## The idea
#
# Chapters 3 to 5 swapped one kind of module at a time. Here all of them go in together:
#
# - every RMSNorm, with the **two-pass** kernel from chapter 3 (two launches per call, the input read twice);
# - every linear layer (attention projections, MLP projections and `lm_head`) with the tiled **matmul**
#   from chapter 4;
# - every attention module with the **per-head loop** from chapter 5 (three launches per query head).
#
# The model still computes the same mathematical function. What changes is how the work is cut into
# kernels, and so how many launches each token costs and how many bytes travel between them. At full
# size the chapter also makes one long generation per model (`SIZES.new_tokens_full_stack` new tokens,
# once each): not to time it, but to see whether and where the two models' outputs part ways.

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
import matplotlib.pyplot as plt
import pandas as pd
import torch

import helpers

helpers.show_env()
SIZES = helpers.SIZES
FULL = helpers.ALL_CUSTOM  # two-pass RMSNorm, every projection, slow attention

# %%
model, tokenizer, description = helpers.load_model()
print(description)
census = helpers.module_census(model)
config = model.config
with helpers.patched(model, **FULL) as counts:
    pass  # just to count what the full stack replaces
replaced = pd.DataFrame([
    {"module": "RMSNorm (two-pass)", "in the model": census["rmsnorm"], "replaced": counts["rmsnorm"]},
    {"module": "linear (matmul)", "in the model": census["linear"],
     "replaced": counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]},
    {"module": "attention (per-head loop)", "in the model": census["attention"], "replaced": counts["attention"]},
])
helpers.show(replaced)
ok = (replaced["in the model"] == replaced["replaced"]).all()
print("every module replaced:", "PASS" if ok else "FAIL")
assert ok, "the full stack must replace every RMSNorm, linear layer and attention module"

# %% [markdown]
# ## Does the custom model compute the same function?
#
# One forward pass over the prompt with each model, then compare the logits (the scores over the
# vocabulary at every position). They cannot be bit-identical: our kernels add numbers in a different
# order than PyTorch's. They should agree closely, and the most likely next token should almost always
# be the same.

# %%
prompt = helpers.make_prompt(SIZES.prompt_len, tokenizer, config.vocab_size)  # the prompt every measurement uses
with torch.no_grad():
    logits_original = model(prompt).logits.float()
    with helpers.patched(model, **FULL):
        logits_custom = model(prompt).logits.float()
err = (logits_custom - logits_original).abs().max().item()
rel = err / logits_original.abs().max().item()
top1 = (logits_custom.argmax(-1) == logits_original.argmax(-1)).float().mean().item()
print(f"max abs logit difference {err:.3e} ({rel:.1e} of the largest logit); "
      f"same top-1 token at {100 * top1:.0f}% of {prompt.shape[1]} positions")
REL_TOLERANCE = helpers.tolerance("full_stack")
ok = rel < REL_TOLERANCE
print("full-stack check:", "PASS" if ok else "FAIL")
assert ok, f"the custom stack moved the logits by {rel:.1e} of their scale (tolerance {REL_TOLERANCE})"

# %% [markdown]
# ## Predict: how many launches per token?
#
# We can count our own launches per decoded token by hand. Each RMSNorm call is two launches, each
# linear layer one matmul (at decode, `lm_head` runs on the last position only), and each attention
# module three launches per query head. PyTorch's own kernels for those modules disappear, but the
# glue between them stays: rotary embeddings, residual additions, the activation, reshapes.
#
# So, before measuring, four predictions, each with the test that will judge it after the measurement:
#
# 1. **Our launches per token** equal the hand count below (a count, so exactly).
# 2. **All launches per token** go up by about the attention loop's launches, 3 per query head per layer
#    (a guess that the other swaps trade PyTorch's launches for ours about one for one, and that the loop
#    brings no PyTorch launches of its own): within 20% of that (`helpers.PREDICTION_BAR`). After the
#    measurement the rise is split swap by swap, from the counts chapters 3 to 5 recorded, to see whether
#    the guess held for the right reason.
# 3. **The GPU-busy time per token** goes up (our kernels are less efficient than PyTorch's, but the work
#    is tiny), by less than half of the wall time the custom model adds per token.
# 4. **The rest of the added wall time** is the host launching kernels: tens of microseconds per extra
#    launch (chapter 5 timed its loop's launches on the host clock), so between 10 and 100 µs.
#
# If 3 and 4 hold, the slowdown comes from launching, not from computing.

# %%
heads = config.num_attention_heads
expected_ours = 2 * counts["rmsnorm"] + (counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]) \
    + 3 * heads * counts["attention"]
print(f"our launches per token, by hand: 2 x {counts['rmsnorm']} + "
      f"{counts['attention_proj'] + counts['mlp_proj'] + counts['lm_head']} + 3 x {heads} x {counts['attention']} "
      f"= {expected_ours}")
attention_loop = 3 * heads * counts["attention"]  # prediction 2: all launches per token rise by about this
print(f"predicted rise of all launches per token: about the attention loop's 3 x {heads} x {counts['attention']} "
      f"= {attention_loop}")

# %% [markdown]
# ## Measure: how much slower?
#
# One pair of runs cannot say how much slower the custom stack is: on a busy host, tokens/s can move by
# tens of percent from one run to the next (the quartiles of the A/A floor below show how much the
# original moved between rounds in yours). `helpers.compare_configs` runs `SIZES.rounds` rounds instead.
# Each round times one greedy generation of `SIZES.new_tokens` new tokens from the same
# `SIZES.prompt_len`-token prompt by the original, by the original again and by the all-custom model, in a
# shuffled order, and divides each time by the original's time in the same round. The median of those
# ratios is the slowdown. The original against itself (the A/A ratio) is this run's noise floor, and the
# verdict says whether the slowdown stands out of it. tokens/s here is new tokens over the whole
# generation time, prefill included. Right after each generation the same model also generates a single
# token (the prefill alone), which gives, from the same rounds, the wall ms per decoded token used in the
# next section. `profile=True` then counts each model's launches and GPU-busy time per decoded token under
# PyTorch's profiler, after the rounds. Most of the time goes into the custom model's generations.

# %%
CUSTOM = "all custom"
ADJECTIVE = {CUSTOM: "all-custom"}  # the name before a noun: "the all-custom model"
comparison = helpers.compare_configs(model, {CUSTOM: FULL}, tokenizer=tokenizer, profile=True)
helpers.show(comparison.table())
tps_note = (f"median of {len(comparison.orders)} shuffled rounds; new tokens / generation time, prefill included; "
            f"prompt {comparison.prompt_len}, {comparison.new_tokens} new tokens")
helpers.record("full.tps_original", comparison.tokens_per_s[helpers.ORIGINAL], "tokens/s", tps_note)
helpers.record("full.tps_custom", comparison.tokens_per_s[CUSTOM], "tokens/s",
               f"{counts['rmsnorm']} two-pass RMSNorm + {census['linear']} matmul + {counts['attention']} "
               f"slow attention; {tps_note}")
slowdown = comparison.record(CUSTOM, "full.slowdown", "all-custom generation time / original's, round by round")
ratio, floor = comparison.ratios[CUSTOM], comparison.floor
helpers.md(
    f"The all-custom model generated **{comparison.tokens_per_s[CUSTOM]:.2f} tokens/s** against "
    f"**{comparison.tokens_per_s[helpers.ORIGINAL]:.2f}** for the original (medians of {len(comparison.orders)} "
    f"rounds, prefill included). Round by round, against an A/A floor of {floor.median_text} "
    f"({floor.quartiles}), its generations were "
    + (f"**{slowdown.text}** than the original's (median of the per-round ratios; quartiles "
       f"{ratio.quartiles})." if slowdown.real else
       f"{ratio.median_text}x the original's time (quartiles {ratio.quartiles}): **within noise** "
       f"({slowdown.reason}).")
)


def read_quotients(comparison, names):
    """Why the table's tokens/s need not divide into its ratios: the quotient of two medians of tokens/s (a
    time ratio, the original's tokens/s over ``name``'s) set beside the median of the per-round ratios."""
    parts = []
    for name in names:
        q = comparison.tokens_per_s[helpers.ORIGINAL] / comparison.tokens_per_s[name]
        r = comparison.ratios[name]
        where = "inside" if r.low <= q <= r.high else "outside"
        parts.append(f"for *{name}* the medians' quotient is {q:.3f} and the median per-round ratio "
                     f"{r.median_text}, the quotient {where} the ratio's quartiles ({r.quartiles})")
    return ("The tokens/s in the table are medians of each configuration's own rounds; the time ratios are "
            "medians of per-round ratios, each time over the original's in the same round. The host's speed "
            "drifts from round to round: a ratio within a round cancels the drift, a quotient of two medians "
            "taken over different rounds does not, so the two readings need not agree. Here, "
            + "; ".join(parts) + ". The verdicts read the per-round ratios.")


helpers.md(read_quotients(comparison, [helpers.ORIGINAL_AGAIN, CUSTOM]))

# %% [markdown]
# ## Where the time goes, per token
#
# The same comparison gives, per decoded token with the prefill taken out: the wall ms, the launches and
# the GPU-busy ms (the kernels' summed durations). The wall ms per decoded token is this series' one time
# per token. The original's is the median over the rounds of (its generation minus the one-token
# generation right after it) / (new tokens - 1); the custom model's is the original's times the median of
# the same per-round quotient, custom over original, so both come from the rounds above. Launches and
# GPU-busy time come from the profile after the rounds (a short generation; the count per token does not
# depend on how many tokens are profiled). tokens/s above is a different quantity: it also carries the
# prefill.
#
# Read the A/A row of the table above first (*original (again)*, the original timed against itself). Where
# its ratio sits off 1 by more than the series' 5% threshold, with its quartiles on one side of 1, the
# original's two slots ran at different speeds inside this one process. The original's wall ms per decoded
# token below comes from one of those slots, so it carries that noise as well as any difference between
# processes; set beside chapter 1's number, part of the gap may be this process's own noise. The slowdown's
# verdict already allows for it: its noise threshold is twice the floor's distance from 1, never under 5%.
# (`helpers.regime`, quoted at the end of the section, calls this wall ms per decoded token the host's time,
# "host time ... ms", and the GPU-busy ms the GPU's time.)

# %%
floor_v = comparison.verdict(helpers.ORIGINAL_AGAIN)  # the floor against the 5% minimum alone
helpers.md(
    f"Here the A/A floor was {floor.median_text} (quartiles {floor.quartiles}): "
    + (f"*original (again)* ran **{floor_v.text}** than the original, so the original's two slots ran at different "
       "speeds in this process. " if floor_v.real
       else f"within noise ({floor_v.reason}), so the original's two slots did not differ beyond noise. ")
    + f"The slowdown's noise threshold was {100 * slowdown.noise:.1f}%, and its median, "
    f"{ratio.median_text}x (quartiles {ratio.quartiles}), read **{slowdown.text}**"
    + ("." if slowdown.real else f" ({slowdown.reason}).")
)

# %%
profiles = {"original": comparison.profile(helpers.ORIGINAL), "custom": comparison.profile(CUSTOM)}
profile_original, profile_custom = profiles["original"], profiles["custom"]
helpers.show(pd.DataFrame([
    {"model": name, "wall ms per decoded token": p.wall_ms_per_token,
     "GPU-busy ms per token": helpers.fmt(p.gpu_busy_ms_per_token, 2),
     "GPU idle share": helpers.fmt(p.gpu_idle_fraction, 2),
     "launches per token": p.launches, "our launches per token": p.project_launches_per_token}
    for name, p in profiles.items()]))
print(f"our launches per token: {profile_custom.project_launches_per_token:.0f} measured, "
      f"{expected_ours} predicted by hand")

wall_note = (f"wall ms per decoded token, prefill excluded, from the {len(comparison.orders)} shuffled rounds of "
             "full.slowdown" + ("" if helpers.HAS_GPU else " (CPU mode: interpreter time)"))
for name, p in profiles.items():
    helpers.record(f"full.launches_per_token_{name}", p.launches, "launches", helpers.launch_note())
    helpers.record(f"full.wall_ms_per_token_{name}", p.wall_ms_per_token, "ms", f"{wall_note}; {p.note}")
    if helpers.HAS_GPU:
        helpers.record(f"full.gpu_busy_ms_per_token_{name}", p.gpu_busy_ms_per_token, "ms",
                       "summed kernel time per decoded token (torch.profiler, after the rounds)")


def slots_apart(comparison):
    """How far apart the original's two identical slots ran in this process: (the faster slot's median tokens/s
    over the slower's, 1 or more; the original's median tokens/s; the A/A copy's)."""
    a, b = comparison.tokens_per_s[helpers.ORIGINAL], comparison.tokens_per_s[helpers.ORIGINAL_AGAIN]
    return max(a, b) / min(a, b), a, b


def read_between_processes(wall_ms, recorded):
    """This chapter's wall ms per decoded token of the original beside chapter 1's (``recorded``: its row of the
    results table, or None): the same model at the same sizes, measured in another process. The words come from
    ``helpers.verdict`` of chapter 1's value over this one, with chapter 1's per-round quartiles where recorded."""
    if recorded is None:
        return ("Chapter 1 has not recorded the original's wall ms per decoded token on this machine "
                "(`baseline.wall_ms_per_token`), so there is no other process to set this one beside.")
    value, low, high = (float(recorded[c]) for c in ("value", "low", "high"))
    quotient = helpers.over_recorded(value, low, high, wall_ms)  # within chapter 1's quartiles, where recorded
    spread = isinstance(quotient, helpers.Ratio)
    v = helpers.verdict(quotient)
    text = (f"Chapter 1 timed the same original model at the same prompt ({SIZES.prompt_len} tokens) and "
            f"{SIZES.new_tokens} new tokens, in its own process: **{value:.2f} wall ms** per decoded token"
            + (f" (quartiles of its rounds {helpers.Ratio(value, low, high, []).quartiles})" if spread else "")
            + f", against **{wall_ms:.2f}** here. Chapter 1's row was {helpers.recorded_when(recorded['time'], helpers.STARTED, 1)}. ")
    if v.real:
        between = max(v.ratio, 1 / v.ratio)  # the two processes' gap, larger over smaller
        within, tps_a, tps_b = slots_apart(comparison)
        # the two gaps' excesses over 1 against each other: half the processes' gap or more inside one process
        # makes the processes' gap no surprise
        w_ex, b_ex = within - 1, between - 1
        how_far = ("at least as far apart as" if w_ex >= b_ex else "nearly as far apart as" if w_ex >= 0.8 * b_ex
                   else "more than half as far apart as" if w_ex >= b_ex / 2 else "less than half as far apart as")
        surprise = w_ex < b_ex / 2
        pct = lambda ex: f"{100 * ex:.1f}%" if ex < 0.01 else f"{100 * ex:.0f}%"
        text += (f"Chapter 1's is {abs(100 * (v.ratio - 1)):.0f}% {'higher' if v.ratio > 1 else 'lower'} "
                 f"(beyond the series' {100 * v.noise:.0f}% noise threshold), though nothing in the model changed. "
                 "The host's pace varies: within this very process, the original's two identical slots ran at "
                 f"median tokens/s of {tps_a:.2f} (*original*) and {tps_b:.2f} (*original (again)*), the faster "
                 f"{pct(w_ex)} above the slower (tokens/s, prefill included: another statistic than wall ms per "
                 f"decoded token, on the same host): {how_far} the two processes"
                 + ("" if v.ratio > 1 else f" (this chapter's {pct(b_ex)} above chapter 1's)")
                 + (", so a gap this size between two processes (two notebooks, one after the other) is no "
                    "surprise. " if not surprise else
                    "; beyond this process's own variation, the host's pace changed between the processes (two "
                    "notebooks, two Python processes, one after the other). ")
                 + "At batch size 1 the host sets the pace, and its pace is not the same in every "
                 "process. That is why every slowdown in this series is a ratio within one comparison's rounds, "
                 "never a quotient of two chapters' numbers.")
    else:  # within noise: a close median says the host kept its pace only where chapter 1's spread is narrow too
        band = sorted(v.bars)
        close = band[0] <= v.ratio <= band[1]
        narrow = not spread or band[0] <= quotient.low and quotient.high <= band[1]
        if close and narrow:
            text += f"The two agree within the series' noise ({v.reason}): the host kept its pace between the processes."
        elif close:
            text += (f"Within the series' noise ({v.reason}), but chapter 1's quartiles over this chapter's value "
                     f"({quotient.quartiles}) reach beyond the {100 * v.noise:.0f}% threshold: the difference does not "
                     "stand out of chapter 1's spread, and that spread is too wide to say whether the host kept its "
                     "pace between the processes.")
        else:
            text += (f"The difference does not stand out of chapter 1's spread ({v.reason}), and that spread is too "
                     "wide to say whether the host kept its pace between the processes.")
    return text


recorded_rows = helpers.results()
recorded_rows = recorded_rows[recorded_rows["id"] == "baseline.wall_ms_per_token"]
helpers.md(read_between_processes(profile_original.wall_ms_per_token,
                                  recorded_rows.iloc[0] if len(recorded_rows) else None))

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
names = ["original", CUSTOM]  # the bars' labels, as in the tables above (profiles' keys name the result ids)
walls = [p.wall_ms_per_token for p in profiles.values()]
if helpers.HAS_GPU:
    busy = [p.gpu_busy_ms_per_token for p in profiles.values()]
    ax.barh(names, busy, color="tab:green", label="GPU busy: summed kernel time (torch.profiler, after the rounds)")
    ax.barh(names, [max(w - b, 0) for w, b in zip(walls, busy)], left=busy, color="tab:gray",
            label="GPU idle: the rounds' wall ms minus GPU busy (waiting for the host)")
else:
    ax.barh(names, walls, color="tab:gray", label="wall time (CPU mode)")
for i, (w, p) in enumerate(zip(walls, profiles.values())):
    ax.text(w, i, f"  {p.launches:.0f} launches", va="center", fontsize=9)
ax.set_xlabel("wall ms per decoded token (bar length: median of the rounds)" if helpers.HAS_GPU else
              "wall ms per decoded token, CPU mode (median of the rounds)")
ax.set_title("Why is the custom stack slower: more work, or more waiting?")
ax.set_xlim(0, max(walls) * 1.35)
ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below the axes, off the bars
helpers.save_figure(fig, "full_stack_time_per_token")
plt.show()

# %%
def read_launch_price(per_extra_us, per_own_us):
    """The host's cost of one extra launch (the custom model's added idle GPU time per added launch) beside
    the original's own idle GPU time per launch, with chapter 2's empty-launch prices where recorded."""
    v = helpers.verdict(per_extra_us / per_own_us)
    text = (f"The original itself left the GPU idle {per_own_us:.1f} µs per launch of its own ((wall - GPU busy) / "
            "launches), so ")
    if not v.real:
        text += f"an extra launch cost about what one of the original's did ({v.reason}). "
    else:  # a price ratio, not a timing of one thing against another: no "slower" here
        text += (f"an extra launch cost the host {per_extra_us / per_own_us:.1f}x that. " if v.ratio > 1 else
                 f"an extra launch cost the host {per_extra_us / per_own_us:.2f}x that, less than one of the "
                 "original's. ")
    rows = helpers.results().set_index("id")
    ids = ("add.launch_us_triton", "add.launch_us_torch")
    if set(ids) <= set(rows.index):
        triton_us, torch_us = (float(rows.loc[i, "value"]) for i in ids)
        stamps = pd.to_datetime(pd.Series([rows.loc[i, "time"] for i in ids]), utc=True, errors="coerce")
        when = helpers.recorded_when("" if stamps.isna().any() else str(stamps.min()), helpers.STARTED, 2)
        text += (f"Chapter 2 timed an empty launch on this machine's host clock: {triton_us:.1f} µs for a Triton "
                 f"kernel, {torch_us:.1f} µs for a one-element PyTorch op ({when}). ")
    else:
        text += "Chapter 2's prices of an empty launch are not in this run's results (run chapter 2 to see them). "
    if v.real and v.ratio > 1:
        text += ("The extra launches are not all alike: most are ours, each through a Python launcher (input checks, "
                 "the grid, Triton's dispatch), and the attention loop also slices and masks in Python once per "
                 "head, where PyTorch dispatches its own ops from C++. Chapter 8 prices each kind of call "
                 "on its own, ours and the original's it replaces, instead of one price per launch. ")
    return text


extra_ms = walls[1] - walls[0]
extra_launches = profile_custom.launches - profile_original.launches
# The per-token walls come from the same rounds as the headline, so their quotient is the headline's ratio
# with the prefill taken out. Does it agree with the headline? (One policy: helpers.verdict.)
agree = helpers.verdict(walls[1] / walls[0] / ratio.median)
text = (f"Per decoded token the wall time went from **{walls[0]:.1f}** to **{walls[1]:.1f} wall ms** and the launches "
        f"from {profile_original.launches:.0f} to {profile_custom.launches:.0f}. ")
if agree.real:  # they disagree beyond the noise threshold: say by how much, and how much the prefill explains
    pre_o, pre_c = comparison.prefill_ms(helpers.ORIGINAL), comparison.prefill_ms(CUSTOM)
    steps = comparison.new_tokens - 1
    rebuilt = (pre_c + steps * walls[1]) / (pre_o + steps * walls[0])  # a whole generation's ratio, from the parts
    text += (f"Divided, the two walls give {walls[1] / walls[0]:.2f}, not the headline's {ratio.median:.2f}: the "
             f"headline times whole generations, whose prefill went from {pre_o:.1f} to {pre_c:.1f} wall ms "
             f"({helpers.versus(pre_c, pre_o)}), while these walls leave it out. Put back together, prefill plus "
             f"{steps} decoded tokens, the parts give a generation ratio of {rebuilt:.2f}")
    if helpers.verdict(rebuilt / ratio.median).real:
        text += (f"; the rest of the gap to {ratio.median:.2f} is the spread between rounds (quartiles "
                 f"{ratio.quartiles}): a median of per-round quotients is not the quotient of "
                 "medians. ")
    else:
        text += ", the headline within the series' noise threshold: the prefill accounts for the difference. "
else:
    text += ("Divided, the two walls give back the headline slowdown within the series' noise threshold: they come "
             "from the same rounds, and leave out only the prefill, one pass out of "
             f"{comparison.new_tokens} per generation. ")
if helpers.HAS_GPU:
    extra_busy = busy[1] - busy[0]
    text += f"The GPU-busy time per token went from {busy[0]:.2f} to {busy[1]:.2f} GPU ms. "
    if slowdown.real and extra_ms > 0 and extra_launches > 0 and extra_busy < extra_ms:
        text += (f"Of the {extra_ms:.1f} wall ms added per token, the GPU was busy for {extra_busy:.2f} GPU ms "
                 f"({100 * extra_busy / extra_ms:.0f}%); for the other {extra_ms - extra_busy:.1f} wall ms "
                 f"({100 * (1 - extra_busy / extra_ms):.0f}%), about {1e3 * (extra_ms - extra_busy) / extra_launches:.1f} µs "
                 f"per extra launch, it was waiting for the host to launch the next kernel. ")
        text += read_launch_price(1e3 * (extra_ms - extra_busy) / extra_launches,
                                  1e3 * (walls[0] - busy[0]) / profile_original.launches)
    text += (f"The GPU sat idle {100 * profile_original.gpu_idle_fraction:.0f}% of each original token and "
             f"{100 * profile_custom.gpu_idle_fraction:.0f}% of each custom one. ")
    # the regimes of chapter 1: the host's pace (wall ms per token) against the GPU's (GPU-busy ms), and the
    # decoded token's work: about 2 flop per weight, every weight read once (tied lm_head counted once)
    weights = list(model.parameters())
    flops, weight_bytes = 2 * sum(w.numel() for w in weights), sum(w.numel() * w.element_size() for w in weights)
    regimes = [helpers.regime(w, b, flops, weight_bytes, per="decoded token", clocks=helpers.TOKEN_CLOCKS)
               for w, b in zip(walls, busy)]
    without_host = helpers.regime(None, busy[0], flops, weight_bytes, per="decoded token")
    text += ("In [the three regimes](01_setup.ipynb#Three-regimes) of chapter 1 (`helpers.regime`, with the wall ms "
             "per decoded token as the host's time to issue a token and the GPU-busy ms as the GPU's time to run "
             "it): "
             + "; ".join(f"the {ADJECTIVE.get(n, n)} model is **{r}** ({why})" for n, (r, why) in zip(names, regimes))
             + f". Were the host out of the way, the work alone would make a token **{without_host[0]}** "
             f"({without_host[1]}, reading {weight_bytes / 1e9:.2f} GB of weights for about {flops / 1e9:.1f} GFLOP).")
else:
    text += ("In CPU mode every one of our launches runs in Triton's interpreter, so the slowdown here measures "
             "the interpreter; the GPU-busy split needs a GPU.")
helpers.md(text)

# %% [markdown]
# ## One decode step on a time axis
#
# The numbers above are sums over a token. A picture of a single decode step shows what they add up from.
# `helpers.step_timeline` prefills the prompt, decodes one warm-up step, then traces the next step with
# `torch.profiler`, recording both sides on one time axis: the host's launch calls (`cudaLaunchKernel` for
# PyTorch's kernels, `cuLaunchKernel` for Triton's) and the kernels the GPU ran. A kernel cannot start
# before the host has launched it, so wherever the host launches more slowly than the GPU finishes kernels,
# the GPU's lane has gaps: the idle time of the table above, drawn. (Host and GPU are chapter 1's
# [GPU you are on](01_setup.ipynb#The-GPU-you-are-on); a step made of such gaps is *overhead-bound*, one
# of [the three regimes](01_setup.ipynb#Three-regimes).)
#
# The traced step is a bare forward pass and argmax, without `generate()`'s own bookkeeping, and the
# profiler adds host time to every event it records: read the picture for its shape and its counts, and
# the rounds above for the time.

# %%
def read_timelines(summaries, profiles):
    """The traced steps ({label: ``helpers.timeline_summary``}) read beside the rounds' per-token profiles
    (same order): counts, the traced span (wall time under the profiler), GPU-busy time, idle share and the mean
    idle gap per kernel."""
    span, busy = helpers.SPAN_US, helpers.BUSY_US  # the summary's two times, both on the profiler's clock
    parts, longer = [], False
    for (label, t), p in zip(summaries.items(), profiles.values()):
        gap_us = (t[span] - t[busy]) / t["GPU kernels"] if t["GPU kernels"] else float("nan")
        span_vs_wall = helpers.verdict(t[span] / 1e3 / p.wall_ms_per_token)
        longer |= span_vs_wall.real and span_vs_wall.ratio > 1
        parts.append(
            f"**{label}**: {t['host launches']} host launches and {t['GPU kernels']} GPU kernels in the step "
            f"({p.launches:.0f} kernels per decoded token in the profile after the rounds); the step spanned "
            f"{t[span] / 1e3:.2f} wall ms (profiled), "
            + (f"{span_vs_wall.ratio:.2f}x as long as" if span_vs_wall.real else "within noise of")
            + f" the rounds' {p.wall_ms_per_token:.2f} wall ms per decoded token (unprofiled); the GPU was busy "
            f"{t[busy] / 1e3:.2f} GPU ms of it, idle {100 * t['GPU idle fraction']:.0f}% of the step "
            f"({100 * p.gpu_idle_fraction:.0f}% per token in the rounds' profile), on average {gap_us:.1f} µs of "
            "idle GPU per kernel")
    (a_label, a), (b_label, b) = summaries.items()
    text = "; ".join(parts) + ". "
    if longer:
        text += ("A traced step spans longer than a token of the rounds mostly because the profiler records every "
                 "launch on the host, and so slows it: the rounds, not the trace, give the time. ")
    more = helpers.verdict(b[span] / a[span])
    text += (f"The {ADJECTIVE.get(b_label, b_label)} step spanned {b[span] / a[span]:.2f}x the {a_label}'s"
             + ("" if more.real else f" (within noise: {more.reason})") + ", with "
             f"{b['GPU kernels'] / a['GPU kernels']:.2f}x the kernels and {b[busy] / a[busy]:.2f}x "
             "the GPU-busy time. ")
    if min(a["GPU idle fraction"], b["GPU idle fraction"]) > 0.5:
        text += ("In both rows the GPU's lane is more gap than kernel: the kernels are short, and each one waits "
                 "for the host's next launch.")
    return text


if helpers.HAS_GPU:
    timelines = {"original": helpers.step_timeline(model, prompt)}  # one decode step after the prompt
    with helpers.patched(model, **FULL):
        timelines[CUSTOM] = helpers.step_timeline(model, prompt)
    helpers.plot_timelines(timelines, name="timeline_full_stack")
    plt.show()
    summaries = {label: helpers.timeline_summary(t) for label, t in timelines.items()}
    table = pd.DataFrame(summaries).T  # the µs columns as whole µs with separators, as the counts (3,341; 10,606)
    helpers.show(table.assign(**{c: table[c].map(lambda v: f"{v:,.0f}") for c in (helpers.SPAN_US, helpers.BUSY_US)}))
    helpers.md(read_timelines(summaries, profiles))
else:
    helpers.md("*The timeline of one decode step needs a GPU (there is no GPU lane to trace in CPU mode); "
               "run this chapter on one to see it.*")

# %% [markdown]
# ## Were the predictions right?
#
# The four predictions made before the measurement, each judged by the test it was given there.

# %%
def judge_predictions(expected_ours, attention_loop, original, custom):
    """The chapter's four predictions against the measured profiles: one row each (prediction, expected,
    measured, held or missed and by how much). Predictions 2 to 4 need every CUDA launch and the GPU-busy
    time, so a GPU."""
    bar = helpers.PREDICTION_BAR
    ours = custom.project_launches_per_token
    rows = [{"prediction": "1. our launches per token = the hand count", "expected": f"{expected_ours}",
             "measured": f"{ours:.0f}",
             "held?": "held" if round(ours) == expected_ours else f"missed by {ours - expected_ours:+.0f} launches"}]
    if not helpers.HAS_GPU:
        for what in ("2. all launches rise by about the attention loop's", "3. extra GPU-busy < half the extra wall",
                     "4. 10-100 µs of waiting per extra launch"):
            rows.append({"prediction": what, "expected": "-", "measured": "-",
                         "held?": "not judged: needs a GPU (CPU mode counts our launches only, no GPU time)"})
        return rows
    rise = custom.launches - original.launches
    off = rise / attention_loop - 1
    rows.append({"prediction": "2. all launches rise by about the attention loop's", "expected": f"+{attention_loop}",
                 "measured": f"{rise:+.0f}",
                 "held?": (f"held ({100 * off:+.0f}%, within {100 * bar:.0f}%)" if abs(off) <= bar else
                           f"missed by {100 * off:+.0f}% (the bar: {100 * bar:.0f}%)")})
    extra_wall = custom.wall_ms_per_token - original.wall_ms_per_token
    extra_busy = custom.gpu_busy_ms_per_token - original.gpu_busy_ms_per_token
    if extra_wall <= 0:
        busy_held = wait_held = f"missed: the wall time per token did not go up ({extra_wall:+.2f} wall ms)"
        busy_measured = wait_measured = "-"
    else:
        share = extra_busy / extra_wall
        busy_measured = f"{extra_busy:.2f} GPU ms of {extra_wall:.1f} wall ms ({100 * share:.0f}%)"
        busy_held = ("held" if extra_busy > 0 and share < 0.5 else
                     "missed: the GPU-busy time did not go up" if extra_busy <= 0 else
                     f"missed: {100 * share:.0f}% of the added wall time, not under 50%")
        if rise > 0:
            per_launch = 1e3 * (extra_wall - extra_busy) / rise
            wait_measured = f"{per_launch:.1f} host µs (wall - GPU-busy)"
            wait_held = ("held" if 10 <= per_launch < 100 else
                         f"missed: {per_launch:.1f} µs is {'under 10' if per_launch < 10 else 'over 100'} µs")
        else:
            wait_measured, wait_held = "-", f"missed: no extra launches ({rise:+.0f})"
    rows.append({"prediction": "3. extra GPU-busy < half the extra wall", "expected": "< 50%",
                 "measured": busy_measured, "held?": busy_held})
    rows.append({"prediction": "4. 10-100 µs of waiting per extra launch", "expected": "10-100 µs",
                 "measured": wait_measured, "held?": wait_held})
    return rows


judged = pd.DataFrame(judge_predictions(expected_ours, attention_loop, profile_original, profile_custom))
helpers.show(judged.set_index("prediction"))
held = judged["held?"].str.startswith("held")
judgeable = ~judged["held?"].str.startswith("not judged")
conclusion = ""
if helpers.HAS_GPU:
    conclusion = (" Predictions 3 and 4 both held: the slowdown came from launching, not from computing."
                  if held.iloc[2] and held.iloc[3] else
                  " Predictions 3 and 4 did not both hold, so this run does not show that the slowdown came from "
                  "launching alone.")
helpers.md(f"{int(held.sum())} of the {int(judgeable.sum())} predictions that this run can judge held"
           + (f" ({int((~judgeable).sum())} need a GPU)" if (~judgeable).any() else "") + "." + conclusion)


def read_launch_rise(original, custom, attention_loop):
    """Prediction 2's launch rise split swap by swap, from the launches per token chapters 3, 4 and 5
    recorded (each swap alone against the same original), with the sign of each part. An error of the
    prediction's guess counts when it exceeds the prediction's own bar (PREDICTION_BAR of the loop's count)."""
    ids = {"rmsnorm": "rmsnorm.launches_per_token_custom", "projections": "matmul.launches_per_token_all_proj_rmsnorm",
           "attention": "attention.launches_per_token_custom"}
    rows = helpers.results().set_index("id")
    missing = [i for i in ids.values() if i not in rows.index]
    if missing:
        return (f"Chapters 3 to 5 have not recorded {', '.join(f'`{i}`' for i in missing)} on this machine, so the "
                "rise is not split swap by swap here.")
    n = {k: float(rows.loc[i, "value"]) for k, i in ids.items()}
    base, rise = original.launches, custom.launches - original.launches
    d_rms = n["rmsnorm"] - base                    # two-pass RMSNorm alone (chapter 3)
    d_proj = n["projections"] - n["rmsnorm"]       # the projections, on top of it (chapter 4)
    d_att = n["attention"] - base                  # the per-head loop alone (chapter 5)
    total = d_rms + d_proj + d_att
    glue = d_att - attention_loop                  # the loop's PyTorch launches, less those of the SDPA it replaces
    per_norm = 2 - d_rms / counts["rmsnorm"]       # PyTorch kernels per RMSNorm call, ours being 2
    text = (f"**The launch rise, swap by swap** (launches per decoded token that chapters 3, 4 and 5 recorded on "
            f"this machine, each swap against the same original's {base:.0f}): the two-pass RMSNorm "
            f"**{d_rms:+.0f}** (about {per_norm:.0f} PyTorch kernels per norm replaced by our 2), the tiled-matmul "
            f"projections **{d_proj:+.0f}**, the per-head attention loop **{d_att:+.0f}**. Together "
            f"{total:+.0f}, against the {rise:+.0f} measured here"
            + (" exactly. " if round(total) == round(rise) else
               f" ({rise - total:+.0f}: the swaps do not add up exactly when combined). ")
            + f"The loop's own kernels are {attention_loop} (3 per query head per layer); its other {glue:+.0f} are "
            f"PyTorch launches, {glue / counts['attention']:.0f} per attention call, net: the PyTorch ops around "
            "our kernels (in `slower_kernels.attention_slow`'s code, each head's mask and the copy of its output into the "
            "result) less the kernels of the SDPA call that the loop replaces. (Exercise 2 below counts one call of "
            "the loop alone, so its PyTorch launches come out higher by SDPA's.) ")
    bar = helpers.PREDICTION_BAR * attention_loop
    other_off, glue_off = abs(d_rms + d_proj) > bar, abs(glue) > bar
    held = abs(rise / attention_loop - 1) <= helpers.PREDICTION_BAR
    if not other_off and not glue_off:
        text += "Prediction 2's guess held for its stated reason: the other swaps traded launches about one for one."
    elif held and other_off and glue_off and (d_rms + d_proj) * glue < 0:
        text += (f"So prediction 2 held for the wrong reason: the other swaps did not trade one for one "
                 f"({d_rms + d_proj:+.0f}), and the loop brought {glue:+.0f} PyTorch launches of its own, net; the two "
                 "errors have opposite signs and largely cancelled.")
    else:
        text += ("So prediction 2's guess was wrong in its parts: "
                 + "; ".join(([f"the other swaps did not trade one for one ({d_rms + d_proj:+.0f})"] if other_off else [])
                             + ([f"the loop brought {glue:+.0f} PyTorch launches of its own, net"] if glue_off else []))
                 + (", though the total came within the bar." if held else "."))
    return text


if helpers.HAS_GPU:
    helpers.md(read_launch_rise(profile_original, profile_custom, attention_loop))

# %%
helpers.show(helpers.compare(["full.tps_original", "full.tps_custom", "full.slowdown",
                              "full.wall_ms_per_token_original", "full.wall_ms_per_token_custom",
                              "full.gpu_busy_ms_per_token_original", "full.gpu_busy_ms_per_token_custom",
                              "full.launches_per_token_original", "full.launches_per_token_custom"]))
ORIGINAL_IDS = ("rmsnorm.tps_original", "matmul.tps_all_proj_rmsnorm_original", "full.tps_original")
blog_originals = [helpers.blog(i) for i in ORIGINAL_IDS]  # the post's unmodified model, in three of its chapters
blog_length = helpers.blog_numbers().set_index("id").loc["full.tps_original", "note"]  # the post's run length
helpers.md(
    f"The blog's T4 run went from {helpers.blog('full.tps_original'):.2f} to {helpers.blog('full.tps_custom'):.2f} "
    f"tokens/s, {helpers.blog('full.slowdown'):.2f}x slower, over {blog_length} (the "
    "post's original speed differs from chapter to chapter: " + ", ".join(f"{v:.2f}" for v in blog_originals)
    + " tokens/s, a hint of the noise between runs). "
    f"Yours is the median of {len(comparison.orders)} rounds of {comparison.new_tokens} new tokens: "
    + (f"{slowdown.text}" if slowdown.real else f"{ratio.median_text}x, within noise") +
    f" (quartiles {ratio.quartiles}). "
    + ("The two factors come from different machines, lengths and methods. A faster GPU shrinks the kernels "
       "more than it shrinks the host's cost of launching them, so the share of each token spent waiting for "
       "launches, and with it the slowdown, depends on the machine: here the GPU sat idle "
       f"{100 * profile_custom.gpu_idle_fraction:.0f}% of each custom token."
       if helpers.HAS_GPU else "These are interpreter numbers, not comparable to a GPU's.")
)

# %% [markdown]
# ## When do the two models part ways?
#
# Both models decode greedily: at every step each picks the token with the highest logit. If two tokens
# are nearly tied, a tiny difference in the logits can flip the pick, and from then on each model
# continues from its own token. To find whether and where, each model generates
# `SIZES.new_tokens_full_stack` new tokens once, greedily, from the prompt above. These generations are not
# timed (the speed comes from the rounds above). The custom model's is the slowest generation of the series,
# so when you run the notebook interactively a progress bar counts its forward passes, one per generated
# token (a run that stores its outputs in the notebook, like the committed one, hides the bar).
#
# To see *why* they differ there (or how close they came, where they never split), we run one forward pass
# of each model over the shared text up to that step (the prompt plus the tokens both generated; the whole
# stream where they never split) and look at the logits that chose each token. That pass computes every
# step at once, while generation computes one token at a time from the KV cache, with other kernel shapes
# and so another order of additions: at a near-tie, the pass's top pick and the generation's need not agree.

# %%
from transformers import GenerationConfig

N = SIZES.new_tokens_full_stack
greedy = GenerationConfig(max_new_tokens=N, min_new_tokens=N, do_sample=False,
                          pad_token_id=config.eos_token_id or 0)  # exactly N new tokens, highest logit each step


def generate_ids(desc):
    """One untimed greedy generation of N new tokens from the prompt; returns the new tokens (1-D, CPU)."""
    with helpers.generation_progress(model, N, desc), torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=greedy)
    return out[0, prompt.shape[1]:].cpu()


ids_original = generate_ids("original, greedy")
with helpers.patched(model, **FULL):
    ids_custom = generate_ids("all custom, greedy")
assert len(ids_original) == len(ids_custom) == N, "generate() must return exactly N new tokens"

# %%
n = min(len(ids_original), len(ids_custom))
differ = (ids_original[:n] != ids_custom[:n]).nonzero().flatten()
first = int(differ[0]) if len(differ) else -1
helpers.record("full.first_divergence", first, "token index",
               "0-based index into the generated tokens; -1: the streams never differ")


def show_tokens(ids):
    if tokenizer is not None:
        return repr(tokenizer.decode(ids))
    return " ".join(str(i) for i in ids.tolist())


after = n - first if first >= 0 else 0  # tokens from the split on
agree_after = int((ids_original[first:n] == ids_custom[first:n]).sum()) if first >= 0 else 0  # same position
if first < 0:
    print(f"the two streams agree on all {n} generated tokens")
else:
    lo, hi = max(0, first - 8), first + 8
    what = "text" if tokenizer is not None else "token ids"  # without the hub there is no tokenizer to decode
    print(f"first difference at generated token {first} of {n}")
    print(f"shared {what} before it:".ljust(30), show_tokens(ids_original[lo:first]))
    print(f"original's {what} from there:".ljust(30), show_tokens(ids_original[first:hi]))
    print(f"custom model's {what} from there:".ljust(30), show_tokens(ids_custom[first:hi]))
    print(f"tokens that agree from the split on (same position): {agree_after} of {after}")

# %%
P = prompt.shape[1]
step = first if first >= 0 else n - 1  # where we look: the split, or the last step when there is none
prefix = torch.cat([prompt, ids_original[:step].to(prompt.device)[None]], dim=1)  # shared by both models
with torch.no_grad():
    steps_original = model(prefix).logits[0, P - 1:].float()  # (step + 1, vocab): logits that chose tokens 0..step
    with helpers.patched(model, **FULL):
        steps_custom = model(prefix).logits[0, P - 1:].float()
at_o, at_c = steps_original[-1], steps_custom[-1]


def name(token):
    return repr(tokenizer.decode([token])) if tokenizer is not None else str(token)


top_o, top_c = at_o.topk(5), at_c.topk(5)
helpers.show(pd.DataFrame({
    "original: token": [name(t) for t in top_o.indices.tolist()], "original: logit": top_o.values.tolist(),
    "custom: token": [name(t) for t in top_c.indices.tolist()], "custom: logit": top_c.values.tolist(),
}, index=pd.RangeIndex(1, 6, name="rank")))

two = at_o.topk(2).values
margins = (steps_original.topk(2).values[:, 0] - steps_original.topk(2).values[:, 1])  # per step, original
logit_gap = (steps_original - steps_custom).abs().max(dim=-1).values  # per step, between the models
print(f"at step {step}: largest logit difference between the models {logit_gap[-1]:.3g}; "
      f"original's top-2 margin {two[0] - two[1]:.3g}")

# %%
def read_after_split(agree, after):
    """What the streams did after their first split: ``agree`` of the ``after`` tokens from the split on match
    position by position. Each model conditions on its own text from there; whether the texts stay apart is
    measured, not assumed (greedy decoding with random weights often falls into a repeating loop that both
    streams can fall back into)."""
    if agree == 0:
        return (f"From the split on, each model conditions on its own text, and none of the {after} tokens from "
                "the split on agree position by position: the two texts stayed apart.")
    share = agree / after
    text = (f"From the split on, each model conditions on its own text, yet {agree} of the {after} tokens from the "
            f"split on ({100 * share:.0f}%) still agree position by position: ")
    if share >= 0.5:
        return text + ("most of the time the streams were back in step, so the flip changed some tokens, not the "
                       "rest of the text (greedy decoding often settles into a repeating pattern that both streams "
                       "can return to; the tokens printed above show the stretch around the split).")
    return text + "most of the later tokens differ, because each model now continues a different text."


pick_o, pick_c = int(at_o.argmax()), int(at_c.argmax())
median_margin = margins[:-1].median().item() if len(margins) > 1 else float("nan")
if first >= 0:
    tok_o, tok_c = int(ids_original[first]), int(ids_custom[first])
    pref_o = (at_o[tok_o] - at_o[tok_c]).item()  # how much the original preferred its own pick
    pref_c = (at_c[tok_c] - at_c[tok_o]).item()  # and the custom model its own
    same_flip = pick_o == tok_o and pick_c == tok_c
    def preference(p, who):
        if p > 0:
            return f"{who} preferred its own token by {p:.3g} in logit"
        if p == 0:
            return f"{who} saw an exact tie (argmax then picks the lower token id)"
        return f"{who} now preferred the other token, by {-p:.3g} in logit"

    bound = 2 * logit_gap[-1].item()  # the most the two models' logits can move the top-2 margin apart
    text = (f"The streams split at generated token **{first}**: the original picked {name(tok_o)}, the custom "
            f"stack {name(tok_c)}. In the forward pass over the shared prefix, {preference(pref_o, 'the original')} "
            f"and {preference(pref_c, 'the custom model')}. The largest logit difference between the two "
            f"models at that step was {logit_gap[-1]:.3g}, so the custom model's logits could close the original's "
            f"top-2 margin by up to twice that, {bound:.3g}; the original's margin there was {margins[-1]:.3g}, "
            + ("within that reach: a flip was possible. " if margins[-1] <= bound else
               "beyond that reach: in this pass no flip was possible. ")
            + (f"Over the steps before, the median margin was {median_margin:.3g}. " if first > 0 else
               "It was the very first step. "))
    text += ("The recomputed logits reproduce the flip. " if same_flip else
             "This recomputation does not reproduce the flip exactly: here both models see the whole prefix "
             "in one pass, while during generation they computed the step from the KV cache, one token at a "
             "time, with different kernel shapes and so yet another order of additions. The pick was that "
             "close. ")
    text += "A near-tie plus a difference in the last digits is all it takes. " + read_after_split(agree_after, after)
    text += (" The position of the split is one sample, not a property of the model: near-ties a rounding step or two wide decide it, "
             "so anything that changes the last bits of a logit (another GPU, another library version, another "
             "algorithm picked by cuBLAS) can move it, and a rerun may find it elsewhere.")
else:
    text = (f"The streams never differ over these {n} tokens: no greedy pick of the generation flipped. At the last "
            f"step the largest logit difference between the models was {logit_gap[-1]:.3g}, so the top-2 margin "
            f"could move by up to {2 * logit_gap[-1]:.3g}, while the median top-2 margin was {median_margin:.3g}. "
            "The figure below counts the steps where a flip was possible, and the reading after it says whether one "
            "forward pass over the whole stream (other kernel shapes, so other roundings) picks differently anywhere. "
            "Longer generations, lower precision or a deeper model make a flip more likely.")
helpers.md(text)

# %%
fig, ax = plt.subplots(figsize=(7, 4))
x = range(len(margins))
lowest = 1e-7  # a log axis cannot show an exact tie or an exact match: plot those at this value
ax.plot(x, margins.clamp_min(lowest).cpu(), marker=".", label="original's top-2 margin (how close the pick was)")
ax.plot(x, (2 * logit_gap).clamp_min(lowest).cpu(), marker=".",
        label="twice the largest logit difference between the models (the most they can close the margin)")
ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
if first >= 0:
    ax.axvline(first, color="red", linestyle="--", label=f"first divergence (token {first})")
ax.set_yscale("log")
helpers.plain_log_ticks(ax, "y")
ax.set_xlabel("generated token index")
ax.set_ylabel("logit units")
ax.set_title("How close was each greedy pick, and how far apart were the models?")
ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15))  # below the axes, off the data
helpers.save_figure(fig, "full_stack_divergence")
plt.show()


def read_flips(margins, logit_gap, flipped):
    """Where a greedy pick could flip, and where it did, over the steps of one forward pass.

    ``margins``: the original's top-2 margin per step; ``logit_gap``: the largest |original - custom| logit per
    step; ``flipped``: where the two models' top picks differ. The custom model's logits are the original's
    moved by at most ``logit_gap``, so its preference for the original's pick over any other token is at least
    ``margin - 2 * logit_gap``: a pick can flip only where ``margin <= 2 * logit_gap`` (at equality at most a
    tie, which goes to the lower token id), and never where the logits are identical (``logit_gap == 0``).
    """
    possible = (margins <= 2 * logit_gap) & (logit_gap > 0)
    n, n_possible, n_flipped = len(margins), int(possible.sum()), int(flipped.sum())
    outside = int((flipped & ~possible).sum())
    closest = int(margins.argmin())
    n_smallest = int((margins == margins.min()).sum())
    text = (f"Over the {n} steps shown, the largest logit difference between the two models had a median of "
            f"{logit_gap.median():.3g} (at most {logit_gap.max():.3g}); the original's top-2 margin had a median of "
            f"{margins.median():.3g} and dipped to {margins.min():.3g}, first at token {closest}"
            + (f" and {n_smallest} times in all" if n_smallest > 1 else "") + ". "
            "The custom model's logits are the original's moved by at most that step's largest difference, so its "
            "margin for the original's pick over any other token is at least the original's margin minus twice "
            "that difference: a pick can flip only where the margin is at most twice the difference (where the "
            f"figure's first line touches or dips below its second). That was the case at {n_possible} of the {n} "
            "steps. ")
    if n_flipped == 0:
        text += "In this forward pass no top pick actually differed between the models."
    else:
        where = ", ".join(str(i) for i in flipped.nonzero().flatten().tolist()[:10])
        text += (f"In this forward pass the two models' top picks actually differed at {n_flipped} of the {n} steps "
                 f"(token {where}" + (", ..." if n_flipped > 10 else "") + ")"
                 + ((", among those steps." if n_flipped == 1 else ", all among those steps.") if outside == 0 else
                    f"; {outside} of them outside those, which the bound rules out: rounding in the comparison "
                    "itself."))
    return text


flipped = steps_original.argmax(-1) != steps_custom.argmax(-1)  # where this pass's top picks differ
helpers.md(read_flips(margins, logit_gap, flipped)
           + (" The red line marks the step where the generated streams first split." if first >= 0 else
              " The generated streams never split."))

# %% [markdown]
# ## Why the same math gives different numbers
#
# Floating-point addition is not associative: $(a + b) + c$ need not equal $a + (b + c)$, because every
# addition rounds its result to the nearest representable number. fp16 has 11 significant bits, so above
# 2048 the representable numbers are 2 apart.

# %%
a = torch.tensor(2048.0, dtype=torch.float16)
one = torch.tensor(1.0, dtype=torch.float16)
print("(2048 + 1) + 1 =", ((a + one) + one).item(), "  in fp16: 2049 rounds back to 2048, twice")
print("2048 + (1 + 1) =", (a + (one + one)).item())

# a realistic case: 4096 numbers summed in three orders, all in float32
x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
orders = {"one after another": x.cumsum(0)[-1].item(),
          "in tiles of 32, then the partial sums": x.view(-1, 32).sum(1).sum().item(),
          "torch.sum's own tree": x.sum().item()}
exact = x.double().sum().item()
for k, v in orders.items():
    print(f"{k:40s} {v:+.9f}   (error {abs(v - exact):.1e} against float64)")

# %% [markdown]
# A matmul kernel with 64 x 64 tiles walks the reduction in chunks of 32 and adds the partial sums in
# its own order; cuBLAS picks another; a fused attention kernel computes its softmax in blocks with a
# running maximum, where our kernel takes the whole row at once. Each difference is in the last bits.
# Through every layer those bits compound; how far they grew in your run is what the logit comparison
# above measured. Neither model is more correct than the other: both are rounding the same exact
# computation, each its own way.

# %%
random_weights = "random" in description
if random_weights:
    helpers.md(
        f"**About this run's weights.** The model here has seeded random weights ({description}). "
        + ("Its speed is the real model's speed: the kernels see the same shapes. " if helpers.MODE != "cpu" else
           "In CPU mode it is also a tiny stand-in for the real architecture, so its times are the interpreter's "
           "on small shapes. ")
        + "Its text is meaningless, and whether and where the two streams split depends on how many near-ties "
        f"these weights produce (the median top-2 margin above was {margins.median():.3g}), so the split, or its "
        "absence, says more about the weights than about our kernels. "
        "*An expectation, not a finding of this run:* a trained model usually puts a clearer favourite on top, "
        "so with the real weights the streams may well agree for longer; only a run with the trained weights "
        "can say."
    )
else:
    helpers.md(
        f"**About this run's weights.** These are the trained weights ({description}), so the text is real and "
        f"the margins are those of a trained model (median top-2 margin {margins.median():.3g}). Without the "
        "hub the series falls back to seeded random weights: the speed stays the same, and the position of the "
        "split changes with the weights' near-ties (*an expectation, not measured here:* random weights, with "
        "no favourite token, would split earlier)."
    )

# %% [markdown]
# ## Takeaway
#
# - All RMSNorms, all projections and all attention modules can run on our own kernels, and the model
#   still computes the same function to within rounding.
# - Measure a slowdown as the median of interleaved rounds, next to the original measured against itself:
#   a single pair of runs can move by several percent, and on a busy host by tens of percent; the A/A floor
#   says how much of a ratio is noise.
#   Absolute times can move between processes too (set chapter 1's original beside this chapter's, above:
#   your run says whether they did), so compare configurations within one run's rounds.
# - To explain a slowdown, put launches, GPU-busy time and wall time per token side by side: extra
#   wall time that the GPU was not busy for is time spent waiting for the host to launch.
# - Greedy decoding amplifies rounding differences: once a near-tie flips, each model continues from a
#   different token. That is floating-point arithmetic, not an error in either model. Whether a flip comes
#   depends on the near-ties.

# %%
helpers.md((f"In this run the generated streams never split over {n} tokens" if first < 0 else
            f"In this run the generated streams split at token {first} of {n}")
           + f"; the one-pass check above found the two models' top picks apart at {int(flipped.sum())} of its "
           f"{len(flipped)} steps.")

# %% [markdown]
# - One decode step drawn on a time axis (on a GPU) shows the same thing as the numbers: short kernels with
#   gaps between them, where the GPU waits for the host's next launch.
#
# Next, chapter 7 asks whether the slowdown holds as the prompt grows.

# %% [markdown]
# ## Try it yourself
#
# Each exercise swaps **one** custom piece in for PyTorch's, in a single call at the decode shape (one
# token: a single row of `hidden_size` numbers, the model's own weights), and times it with
# `helpers.compare_calls`: the two calls in shuffled rounds, PyTorch's against itself as the A/A floor. On a
# GPU the clock is **GPU time** (CUDA-graph replay), which leaves the host's launch cost out: the question
# is what the GPU itself does with fewer or more kernels. In CPU mode the clock is the interpreter's wall
# time, and the answer says nothing about a GPU. Set `answer` to your guess and run the cell; it prints
# the measurement and whether your guess matches it.

# %%
import torch.nn.functional as F

import slower_kernels

layer = model.model.layers[0]  # any layer: they all have the same shapes
x_row = torch.randn(1, config.hidden_size, device=helpers.DEVICE, dtype=helpers.DTYPE)  # one decoded token
quiet = torch.no_grad()  # a call wrapped in it records no autograd graph


def launches(calls):
    """Kernels one call launches, for each call ({name: fn}): every CUDA kernel (a CUDA graph's) on a GPU, our
    Triton kernels only in CPU mode. Prints them and returns {name: count}."""
    kind = "CUDA kernel{}" if helpers.HAS_GPU else "of our Triton kernel{} (CPU mode)"
    counted = {name: helpers.launches_per_call(fn) for name, fn in calls.items()}
    print("; ".join(f"{name}: {n:.0f} {kind.format('' if f'{n:.0f}' == '1' else 's')} per call"
                    for name, n in counted.items()))
    return counted


def beside_recorded(ratio, chapter, ids, same="the same call"):
    """This exercise's ratio (a helpers.Ratio) beside the one chapter ``chapter`` recorded for ``same`` (the same
    call, or what the two timings share), at the same shape and clock, in another process: ``ids`` is one ratio id
    (with its quartiles) or a pair (numerator, denominator) of recorded medians. Holds the two to the series' bar
    for a re-measured ratio (helpers.REPRODUCE_BAR)."""
    rows = helpers.results().set_index("id")
    needed = [ids] if isinstance(ids, str) else list(ids)
    if not all(i in rows.index and pd.notna(rows.loc[i, "value"]) for i in needed):
        print(f"chapter {chapter}'s ratio for this call is not in this run's results (run chapter {chapter} to set "
              "it beside this one)")
        return
    if isinstance(ids, str):
        value, low, high = (float(rows.loc[ids, c]) for c in ("value", "low", "high"))
        spread = (f", quartiles {helpers.Ratio(value, low, high, []).quartiles}" if pd.notna(low) and pd.notna(high)
                  else "")
    else:
        value = float(rows.loc[ids[0], "value"]) / float(rows.loc[ids[1], "value"])
        spread = ", the quotient of its two medians"
    stamps = pd.to_datetime(pd.Series([rows.loc[i, "time"] for i in needed]), utc=True, errors="coerce")
    when = helpers.recorded_when("" if stamps.isna().any() else str(stamps.min()), helpers.STARTED, chapter)
    off, bar = ratio.median / value - 1, helpers.REPRODUCE_BAR
    # this run's median and quartiles and the recorded value to one number of digits, enough that the quartiles
    # differ and the recorded value prints unlike either of them (0.2172 beside 0.2140-0.2170, not 0.217 beside 0.217)
    text = lambda v, d: f"{v:.0f}" if abs(v) >= 1000 else f"{v:#.{d}g}".rstrip(".")  # noqa: E731  (as Ratio's)
    digits = 3
    while digits < 6 and ((ratio.low != ratio.high and text(ratio.low, digits) == text(ratio.high, digits))
                          or (value not in (ratio.low, ratio.high)
                              and text(value, digits) in (text(ratio.low, digits), text(ratio.high, digits)))):
        digits += 1
    print(f"re-measured in this process: {text(ratio.median, digits)}x (quartiles {text(ratio.low, digits)}-"
          f"{text(ratio.high, digits)}); chapter {chapter} recorded {text(value, digits)}x{spread}, for {same} "
          f"({when}). This run's is {100 * abs(off):.1f}% "
          f"{'above' if off > 0 else 'below'} it, {'within' if abs(off) <= bar else 'beyond'} the series' "
          f"{100 * bar:.0f}% bar for a re-measured ratio, and chapter {chapter}'s value lies "
          f"{'inside' if ratio.low <= value <= ratio.high else 'outside'} this run's quartiles: the quartiles show "
          "the spread within one process, not how far the same call moves between processes (chapter 8 sets "
          "re-measured ratios beside recorded ones).")


# %% [markdown]
# **1. The RMSNorm alone.** Our two-pass RMSNorm is 2 kernels per call; Qwen3's own RMSNorm in PyTorch is
# a chain of small elementwise and reduction kernels (the swap-by-swap split above counted how many). At a
# single row each kernel has almost nothing to do, so a call's GPU time is mostly each kernel's fixed cost
# of starting and finishing. Count the kernels first (the cell prints them), then guess the GPU time of
# one call of ours against one of PyTorch's.
#
# *What to expect, and why:* faster, by roughly the ratio of the kernel counts. One row is a few kB, a
# fraction of a microsecond of reading on a T4 as on an H200, so each kernel costs about its floor and
# fewer kernels take less GPU time. The floors are not all alike, though (a kernel's depends on its grid
# and on what it does, and PyTorch's chain mixes casts, a reduction and elementwise steps), so the measured
# ratio can land some way off the counts' ratio, on either side. Chapter 3 timed the same call at the same
# shape; the cell sets its ratio beside yours.

# %%
answer = None  # your guess: "faster", "slower" or "same"
norm = layer.input_layernorm
ours, theirs = (quiet(lambda: slower_kernels.rmsnorm_two_pass(x_row, norm.weight, norm.variance_epsilon)),
                quiet(lambda: norm(x_row)))
launches({"two-pass RMSNorm": ours, "PyTorch's RMSNorm": theirs})
cmp = helpers.compare_calls({"two-pass RMSNorm": ours}, reference=theirs)
measured = helpers.check_answer(answer, cmp.ratios["two-pass RMSNorm"], cmp.floor,
                     change="two-pass RMSNorm instead of PyTorch's, one row", clock=cmp.clock)
beside_recorded(cmp.ratios["two-pass RMSNorm"], 3, "rmsnorm.decode_two_pass_ratio")

# %% [markdown]
# **2. The attention alone.** One decode step of one attention module: a single query per head against the
# keys and values of the chapter's prompt plus its new tokens. PyTorch's SDPA does it in one fused kernel;
# our loop launches 3 kernels per query head, plus the PyTorch ops around them. Guess the direction before
# you run it.
#
# *What to expect, and why:* slower, by dozens of times. The keys and values are a few hundred kB at
# most, so here too the kernel count sets the GPU time: the loop's dozens of kernels, each near its floor,
# against SDPA's one, on a T4 as on an H200. The cell also splits the loop's kernels into ours and
# PyTorch's, the count behind the swap-by-swap split above.

# %%
answer = None  # your guess: "faster", "slower" or "same"
T = SIZES.prompt_len + SIZES.new_tokens  # keys in the cache at the end of a generation
hq, hkv, d = config.num_attention_heads, config.num_key_value_heads, config.head_dim
q = torch.randn(1, hq, 1, d, device=helpers.DEVICE, dtype=helpers.DTYPE)  # (B, Hq, S=1, D)
k, v = (torch.randn(1, hkv, T, d, device=helpers.DEVICE, dtype=helpers.DTYPE) for _ in range(2))  # (B, Hkv, T, D)
loop = lambda: slower_kernels.attention_slow(q, k, v, scale=d ** -0.5, causal=True)
sdpa = lambda: F.scaled_dot_product_attention(q, k, v, scale=d ** -0.5, enable_gqa=hq != hkv)
n = launches({"per-head loop": loop, "SDPA": sdpa})
if helpers.HAS_GPU:  # the loop's kernels, split as in the swap-by-swap count above
    torch_n = n["per-head loop"] - 3 * hq
    print(f"of the loop's {n['per-head loop']:.0f}: 3 x {hq} = {3 * hq} ours and {torch_n:.0f} PyTorch's; less "
          f"SDPA's {n['SDPA']:.0f} that the swap removes, {torch_n - n['SDPA']:+.0f} PyTorch launches per call, net "
          "(the split above counts the same net figure per attention call in the model)")
cmp = helpers.compare_calls({"per-head loop": loop}, reference=sdpa)
measured = helpers.check_answer(answer, cmp.ratios["per-head loop"], cmp.floor,
                     change=f"per-head loop instead of SDPA, one query, {T} keys", clock=cmp.clock)

# %% [markdown]
# **3. One projection alone.** The MLP's up projection for one token: a row times a weight matrix of
# `hidden_size` x `intermediate_size`. Both versions are one kernel and must read every weight once, and at
# one row that read is almost all the work (memory-bound, in [the three regimes](01_setup.ipynb#Three-regimes)).
# A difference can only come from how well each kernel streams the weight: cuBLAS can choose a kernel
# shaped for a single row, while our matmul computes a 64-row tile (`slower_kernels.DEFAULT_TILE`) of which 63
# rows are padding. So expect "same" or "slower", not "faster"; which one?
#
# *What to expect, and why:* on an H200, slower. Our grid has one program per 64 output columns,
# `intermediate_size / 64` of them, each walking its strip of weights, `hidden_size` deep, 32 at a time: fewer
# programs than the H200 has SMs, so part of the GPU never pulls on the weight, where cuBLAS spreads the
# read over all of it. On a T4, with fewer SMs (40) and a fifteenth of the bandwidth, our programs cover every
# SM and the read itself takes most of the time, so the gap may be smaller there, possibly near the 5%
# threshold. Chapter 4 timed the same shape and kernels, through `slower_kernels.matmul(a, w.t())` and `a @ w.t()` on
# random operands where this cell calls `slower_kernels.linear` and `F.linear` on the model's weight; the cell sets its
# ratio beside yours.

# %%
answer = None  # your guess: "faster", "slower" or "same"
W = layer.mlp.up_proj.weight  # (intermediate_size, hidden_size)
tiled, cublas = quiet(lambda: slower_kernels.linear(x_row, W)), quiet(lambda: F.linear(x_row, W))
cmp = helpers.compare_calls({"tiled matmul": tiled}, reference=cublas)
measured = helpers.check_answer(answer, cmp.ratios["tiled matmul"], cmp.floor,
                     change="tiled matmul instead of F.linear, one row of the up projection", clock=cmp.clock)
if tuple(SIZES.matmul_decode_shape) == (1, config.hidden_size, config.intermediate_size):  # chapter 4's decode shape
    beside_recorded(cmp.ratios["tiled matmul"], 4, ("matmul.decode_triton_ms", "matmul.decode_torch_ms"),
                    same="the same shape and kernels, called through slower_kernels.matmul(a, w.t()) and a @ w.t() on "
                         "random operands")
else:
    print(f"chapter 4 timed its decode matmul at {SIZES.matmul_decode_shape} in this mode, not at this projection's "
          "shape: there is no recorded ratio to set beside this one")
