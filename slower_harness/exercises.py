"""The exercises: a reader's guess (faster, slower or the same) checked against a measured ratio with the series'
one verdict rule."""
from __future__ import annotations

from slower_harness.display import md
from slower_harness.formats import places_apart
from slower_harness.stats import Ratio, verdict

ANSWERS = ("faster", "slower", "same")


def check_answer(answer: str | None, ratio: "Ratio | float", floor: "Ratio | None" = None,
                 change: str = "the change", clock: str = "") -> str:
    """Check an exercise: ``answer`` ("faster", "slower" or "same"; None before the reader answers)
    against a measured time ratio (above 1: slower) judged by ``verdict`` with the run's A/A floor.
    Prints the measurement and whether the answer matches it; returns the measured word."""
    if answer is not None and answer not in ANSWERS:
        raise ValueError(f"answer must be one of {ANSWERS} or None, got {answer!r}")
    v = verdict(ratio, floor)
    measured = "same" if not v.real else "slower" if v.ratio > 1 else "faster"
    r = ratio if isinstance(ratio, Ratio) else Ratio.of([ratio])
    # a real difference in the verdict's own words ("1.10x slower"); within noise, the ratio itself beside the rule
    if v.real:  # the verdict's own words; a speed-up beside the time ratio its quartiles describe
        said = f"{change}: " + (v.text if v.ratio > 1 else f"time ratio {r.median_text} ({v.text})")
    else:  # enough digits that a median inside the threshold does not print as the threshold itself (1.045, not 1.05)
        places = len(r.median_text.partition(".")[2])
        wider = places_apart(r.median, v.bars, places=places, most=5)
        shown = r.median_text if wider == places else f"{r.median:.{wider}f}"
        said = f"{change}: {shown}x the time (within noise; {v.reason})"
    if len(r.values) > 1:
        said += f"; quartiles {r.quartiles} over {len(r.values)} rounds"
    said += f"; A/A floor {floor.median:.3f}" if floor is not None else ""
    said += f", {clock}" if clock else ""
    if v.near_threshold:
        said += f". This lies near {v.threshold_text}: another run may call it the other way"
    if answer is None:
        md(f"**Measured** {said}. Set `answer` to one of {', '.join(repr(a) for a in ANSWERS)} and run the cell "
           "again to check yourself.")
    else:
        mark = "matches" if answer == measured else f"does not match (measured: {measured!r})"
        md(f"**Your answer {answer!r} {mark}.** Measured {said}.")
    return measured
