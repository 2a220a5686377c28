"""Numbers, not sentences: the ratios of two timings over shuffled rounds (``Ratio``), the one verdict rule that
calls a ratio slower, faster or within noise (``verdict``, ``verdict_line``), trends across a sweep
(``read_trend``); their numbers print through ``formats``. Pure Python: no torch, no GPU, nothing run at import."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from slower_harness.formats import places_apart, versus

MIN_EFFECT = 0.05  # the smallest change (5%) the series calls real, however quiet the host


@dataclass
class Ratio:
    """Per-round ratios of a configuration's time to the original's (above 1: slower), summarised."""
    median: float
    low: float     # lower quartile of the per-round ratios
    high: float    # upper quartile
    values: list

    @classmethod
    def of(cls, values) -> "Ratio":
        values = [float(v) for v in values]
        if len(values) == 1:
            return cls(values[0], values[0], values[0], values)
        q = statistics.quantiles(values, n=4, method="inclusive")
        return cls(statistics.median(values), q[0], q[2], values)

    @staticmethod
    def _text(v: float, digits: int) -> str:
        return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"

    @property
    def _digits(self) -> int:
        """3 significant digits, more (up to 6) where two different quartiles would print alike (0.1752-0.1754,
        not 0.18-0.18) or one just off 1 would print as 1."""
        digits = 3
        while digits < 6 and ((self.low != self.high and self._text(self.low, digits) == self._text(self.high, digits))
                              or any(v != 1 and self._text(v, digits) == "1" for v in (self.low, self.high))):
            digits += 1
        return digits

    @property
    def quartiles(self) -> str:
        """"low-high" to ``_digits`` significant digits: whether the middle half of the rounds lies on both sides
        of 1 must be readable. 1000 and above whole, without a separator."""
        digits = self._digits
        ends = [self._text(v, digits) for v in (self.low, self.high)]
        if not any("e" in t for t in ends):  # both ends to the same decimals: 0.979-0.980, not 0.979-0.98
            places = max(len(t.partition(".")[2]) for t in ends)
            ends = [t if abs(v) >= 1000 else f"{v:.{places}f}" for t, v in zip(ends, (self.low, self.high))]
        return (" to " if self.low < 0 else "-").join(ends)  # -1.180 to -0.431, not -1.180--0.431

    @property
    def median_text(self) -> str:
        """The median to the same digits as ``quartiles``, so that the two read alike beside each other (0.176 in
        0.175-0.177, not 0.18), trailing zeros kept as a verdict writes them (1.10, as in "1.10x slower")."""
        if abs(self.median) >= 1000:
            return self._text(self.median, self._digits)
        text = f"{self.median:#.{self._digits}g}".rstrip(".")
        ends = self.quartiles
        if " to " in ends or "e" in ends or "e" in text:
            return text
        places = max(len(t.partition(".")[2]) for t in ends.split("-"))  # 1.005 beside 0.983-1.017, not 1.01
        return f"{self.median:.{places}f}" if places > len(text.partition(".")[2]) else text


@dataclass
class Verdict:
    """The words for a ratio, and whether it stands out of the noise."""
    text: str       # "1.80x slower", "1.25x faster" or "within noise"
    real: bool      # outside the noise: the words may say slower or faster
    ratio: float
    noise: float    # the threshold used: a ratio within 1 +- noise is "within noise"
    reason: str = ""  # why "within noise": which rule held it back (empty when real)

    @property
    def bars(self) -> tuple:
        """The two ratios the verdict turns on, 1 + noise and 1 / (1 + noise): a median printed beside it must not
        read as one of them (``places_apart``)."""
        return 1 + self.noise, 1 / (1 + self.noise)

    @property
    def threshold_text(self) -> str:
        """The threshold this verdict used, in words: the series' (5% from 1) or, where the A/A floor widened it,
        its own beside the series' minimum."""
        if self.noise > MIN_EFFECT * (1 + 1e-9):
            return (f"its threshold ({threshold_pct(self.noise)} from 1: twice its A/A floor's distance from 1, "
                    f"wider than the series' {100 * MIN_EFFECT:.0f}% minimum)")
        return f"the series' threshold ({100 * self.noise:.0f}% from 1)"

    @property
    def near_threshold(self) -> bool:
        """Within half the threshold's width of it, on the log scale: another run may call it the other way."""
        edge = math.log(1 + self.noise)
        return self.ratio > 0 and abs(abs(math.log(self.ratio)) - edge) < edge / 2


def threshold_pct(noise: float, edge: float = MIN_EFFECT) -> str:
    """A threshold as a percentage, whole unless a widened one would print as ``edge``, the threshold it widens
    (the series' minimum: 5.3%, not 5%)."""
    return f"{100 * noise:.{places_apart(100 * noise, (100 * edge,), places=0, most=1)}f}%"


def noisier_floor(floors) -> Ratio | None:
    """Of several A/A floors (None ignored), the one furthest from 1: what a comparison across two sets of rounds
    is held against (``noise_threshold``); None without one."""
    floors = [f for f in floors if f is not None]
    return max(floors, key=lambda f: abs(f.median - 1)) if floors else None


def noise_threshold(floor: Ratio | None = None) -> float:
    """How far a median ratio must be from 1 to count as a difference (above 1 + noise, or below
    1 / (1 + noise)): twice the A/A floor's own distance from 1 (the original against itself, measured in
    the same run), and never under MIN_EFFECT."""
    return max(MIN_EFFECT, 2 * abs(floor.median - 1)) if floor is not None else MIN_EFFECT


def verdict(ratio: Ratio | float, floor: Ratio | None = None) -> Verdict:
    """One policy for every chapter: a ratio of times (above 1: slower) in words.

    Real when the median is beyond ``1 + noise`` or below ``1 / (1 + noise)`` (``noise_threshold(floor)``)
    and, where per-round values exist, the middle half of them (the quartiles) lies on the same side of 1.
    ``Verdict.reason`` says which rule held a "within noise" back: the 5% minimum, the floor, or the
    quartiles, so that a reading never calls a 0.1% floor "noise" when the minimum effect decided.
    """
    r = ratio if isinstance(ratio, Ratio) else Ratio.of([ratio])
    noise = noise_threshold(floor)
    if r.median <= 0:  # a time ratio is positive: a difference of two noisy times (per token) went below zero
        return Verdict("within noise", False, r.median, noise,
                       f"its median, {r.median:.3g}, is not a positive time ratio: the times it divides are smaller "
                       "than the noise of the timings they come from")
    same_side = r.low > 1 or r.high < 1
    # symmetric in log space: "x slower" beyond 1 + noise, "x faster" below 1 / (1 + noise)
    beyond = r.median > 1 + noise or r.median < 1 / (1 + noise)
    if not (beyond and same_side):
        if not beyond:
            reason = (f"closer to 1 than the series' smallest real effect ({100 * MIN_EFFECT:.0f}%)"
                      if noise == MIN_EFFECT else
                      f"closer to 1 than twice the A/A floor's distance from 1 ({threshold_pct(noise)})")
        else:
            reason = f"its quartiles ({r.quartiles}) lie on both sides of 1"
        return Verdict("within noise", False, r.median, noise, reason)
    return Verdict(versus(r.median, 1.0), True, r.median, noise)


def verdict_line(label: str, ratio: "Ratio | float", floor: "Ratio | None" = None) -> str:
    """One comparison on one line: "two-pass / fused: 1.66x slower, quartiles 1.65-1.67, A/A floor 1.00"
    (quartiles where there are rounds, the floor where there is one)."""
    r = ratio if isinstance(ratio, Ratio) else Ratio.of([ratio])
    v = verdict(r, floor)
    parts = [f"{label}: {v.text}" + ("" if v.real else f" (median {r.median_text})")]
    if len(r.values) > 1:
        parts.append(f"quartiles {r.quartiles}")
    if floor is not None:
        parts.append(f"A/A floor {floor.median:.3f}")
    return ", ".join(parts)


@dataclass
class Trend:
    word: str               # "grew", "shrank" or "no consistent trend"
    text: str               # the reading, a verb phrase: "grew with the context ...", "showed no consistent trend: ..."
    change: Ratio   # last point over first, with the widest quartile bounds
    verdict: Verdict
    points: str             # every point's median, "128: 4.10x, 256: ..."
    flat: bool = False      # no consistent trend, and every two points within the noise threshold of each
                            # other: a flat line
    both_ways: bool = False  # moves beyond the noise threshold in both directions (a fall and a rise, or the reverse)


def read_trend(points: dict, floors: dict | None = None, unit: str = "x", along: str = "the context") -> Trend:
    """How a quantity measured at several prompt lengths moved, read from every point.

    ``points``: {prompt length: Ratio} (median and quartiles of the per-round values); ``floors``:
    {prompt length: the A/A floor of that run}. "grew"/"shrank" only when no two points moved against each
    other beyond the noise threshold (a smaller move counts as level; no point falls that far behind any point
    before it) and the change from the first point to the last is outside the noise by ``helpers.verdict``
    (last over first, with the widest quartile bounds the two points allow, against the noisier end's A/A
    floor). A step against the trend but inside the noise is named in the reading ("at every step" only
    when no step went the other way). Otherwise "no consistent trend", with the reason; ``Trend.flat`` then says
    whether the line was flat (every point within the noise threshold of every other) and ``Trend.both_ways``
    whether it moved beyond the threshold both ways (neither: it moved, but not clearly).
    Any two points are held to the threshold of the noisier of their own floors where that is wider than the
    ends' (the reading names those points): a point whose A/A floor lay far from 1 moves beyond the noise only by
    more than its own verdicts would call noise. Directions are read between every two points, not only
    neighbours, so a move between two quiet points is seen across a noisy one between them.
    """
    lengths = sorted(points)
    first, last = points[lengths[0]], points[lengths[-1]]
    change = Ratio(last.median / first.median, last.low / first.high, last.high / first.low, [])
    floor = noisier_floor(floors[L] for L in (lengths[0], lengths[-1]) if floors and L in floors)
    v = verdict(change, floor)
    medians = [points[L].median for L in lengths]
    own = {L: noise_threshold(floors[L]) for L in lengths if floors and floors.get(L) is not None}
    wider = {L: t for L, t in own.items() if t > v.noise}  # points held to their own, wider thresholds

    def noise(i, j) -> float:  # the threshold between points i and j: the ends', or their own floors' if wider
        return max([v.noise] + [own[lengths[k]] for k in (i, j) if lengths[k] in own])

    def apart(i, j) -> bool:
        return max(medians[i], medians[j]) / min(medians[i], medians[j]) - 1 >= noise(i, j)

    # two points closer than their noise threshold are level: they neither break nor make a direction
    pairs = [(i, j) for i in range(len(medians)) for j in range(i + 1, len(medians)) if apart(i, j)]
    rises, falls = ([p for p in pairs if (medians[p[1]] - medians[p[0]]) * sign > 0] for sign in (1, -1))
    flat, both_ways = not pairs, bool(rises and falls)
    held = (f"; {'the point' if len(wider) == 1 else 'the points'} at {', '.join(str(L) for L in wider)} held to "
            + ("its own A/A floor's wider threshold (" if len(wider) == 1 else
               "their own A/A floors' wider thresholds (")
            + ", ".join(threshold_pct(t, v.noise) for t in wider.values()) + ")") if wider else ""

    def fmt(x, more=0):  # "x" to 3 significant digits (0.176x, 1.71x, 12.3x), other units to 0.1; plus ``more``
        if unit != "x":
            return f"{x:.{1 + more}f} {unit}"
        places = max(0, 2 - math.floor(math.log10(abs(x)))) if x and math.isfinite(x) else 2
        return f"{x:.{places + more}f}x"

    def a_to_b(a, b, labels=("", "")) -> str:  # "a to b" in the digits (up to 3 more) that tell them apart
        more = next((d for d in range(4) if fmt(a, d) != fmt(b, d)), 0 if a == b else 3)  # equal: no padding
        return f"{labels[0]}{fmt(a, more)} to {labels[1]}{fmt(b, more)}"

    every = ", ".join(f"{L}: {fmt(m)}" for L, m in zip(lengths, medians))
    span = a_to_b(medians[0], medians[-1])
    if v.real and not both_ways:
        word = "grew" if v.ratio > 1 else "shrank"
        # steps that went the other way by less than the noise threshold: flat by the rule, but named
        against = [i for i in range(len(medians) - 1) if (medians[i + 1] - medians[i]) * (v.ratio - 1) < 0]
        back = [a_to_b(medians[i], medians[i + 1], (f"{lengths[i]}: ", f"{lengths[i + 1]}: ")) for i in against]
        if not back:
            return Trend(word, f"{word} with {along} at every step: {span}, outside the noise{held}", change, v,
                         every)
        return Trend(word, f"{word} with {along}: {span}, outside the noise; the step{'s' if len(back) > 1 else ''} "
                     f"against it ({'; '.join(back)}) stayed inside the noise threshold "
                     f"({threshold_pct(max(noise(i, i + 1) for i in against), v.noise)}){held}",
                     change, v, every)
    reasons = []
    if change.low <= 1 <= change.high:  # the quartiles leave room for no change: the spread is at least the change
        reasons.append("within the per-round spread")
    elif not v.real:
        reasons.append(f"within noise by the series' rule (its noise threshold here: {100 * v.noise:.0f}% from 1)")
    if both_ways:
        reasons.append("not one way from point to point")
    inner = medians[1:-1]  # the points between the two ends, named where they reach outside them
    outside = inner and (min(inner) < min(medians[0], medians[-1]) or max(inner) > max(medians[0], medians[-1]))
    between = f" (the points between ranged from {a_to_b(min(inner), max(inner))})" if outside else ""
    return Trend("no consistent trend",
                 f"showed no consistent trend: {span}{between}, {' and '.join(reasons)}{held}",
                 change, v, every, flat, both_ways)
