"""slower_harness.stats: ratios over rounds, the one verdict rule, trends across a sweep."""
import pytest

from slower_harness import stats
from slower_harness.stats import Ratio


@pytest.mark.parametrize("values, floor, text, real", [
    ([1.8, 1.7, 1.9, 1.8], None, "1.80x slower", True),
    ([0.5, 0.52, 0.48, 0.5], None, "2.00x faster", True),
    ([1.03, 0.98, 1.01, 1.02], None, "within noise", False),   # under MIN_EFFECT
    ([1.3, 0.8, 1.4, 0.9, 1.2], None, "within noise", False),  # the quartiles straddle 1
    ([1.08, 1.09, 1.07, 1.08], [1.06, 1.05, 1.07, 1.04], "within noise", False),  # 2 x the A/A floor's 5.5%
    ([1.2, 1.21, 1.19, 1.2], [1.06, 1.05, 1.07, 1.04], "1.20x slower", True),
])
def test_verdict_knows_the_noise(values, floor, text, real):
    v = stats.verdict(Ratio.of(values), Ratio.of(floor) if floor else None)
    assert (v.text, v.real) == (text, real)


def test_verdict_is_symmetric_so_a_noisy_floor_still_allows_faster():
    floor = Ratio.of([2.0, 1.9, 2.1])  # a wild A/A floor: the threshold is 200% from 1
    assert stats.verdict(Ratio.of([0.128, 0.12, 0.13]), floor).text == "7.81x faster"
    assert stats.verdict(Ratio.of([0.4, 0.38, 0.42]), floor).text == "within noise"  # 2.5x < 3x
    assert stats.verdict(Ratio.of([2.5, 2.4, 2.6]), floor).text == "within noise"


def test_verdict_of_a_single_ratio_uses_the_minimum_effect():
    assert stats.verdict(1.5).text == "1.50x slower"
    assert stats.verdict(1.04).text == "within noise"
    assert stats.verdict(0.04).text == "25x faster"


@pytest.mark.parametrize("values, text, median", [
    ([0.1751, 0.1753, 0.1755], "0.1752-0.1754", "0.1753"),  # not 0.175-0.175, nor a median of 0.18
    ([0.9996, 1.0, 1.0004], "0.9998-1.0002", "1.0000"),  # just off 1: enough digits to see which side
    ([1480.0, 1500.0, 1520.0], "1490-1510", "1500"),
    ([4.27, 4.46, 4.6], "4.37-4.53", "4.46"),
    ([1.08, 1.1, 1.14], "1.09-1.12", "1.10"),  # trailing zero kept, as the verdict writes "1.10x slower"
])
def test_ratio_quartiles_are_readable(values, text, median):
    r = Ratio.of(values)
    assert (r.quartiles, r.median_text) == (text, median)


@pytest.mark.parametrize("low, high, text", [
    (0.979, 0.98, "0.979-0.980"),  # both ends to the same decimals: a dropped zero reads as a shorter number
    (1.98, 2.0, "1.98-2.00"),
    (998.4, 1002.0, "998-1002"),   # 1000 and above stays whole
])
def test_ratio_quartiles_print_both_ends_to_the_same_decimals(low, high, text):
    assert Ratio(high, low, high, []).quartiles == text


def test_a_ratio_below_zero_is_noise_and_prints_its_quartiles_apart():
    v = stats.verdict(Ratio(-0.03, -0.2, 0.1, []))
    assert not v.real and v.text == "within noise" and "not a positive time ratio" in v.reason
    assert not v.near_threshold
    assert Ratio(-0.8, -1.18, -0.431, []).quartiles == "-1.180 to -0.431"
    assert Ratio(0.9, 0.85, 0.95, []).quartiles == "0.85-0.95"


def test_a_trend_ignores_steps_inside_the_noise():
    R = Ratio.of
    points = {128: R([1.0, 0.98, 1.02]), 256: R([1.5, 1.48, 1.52]), 512: R([1.49, 1.47, 1.51]), 1024: R([2.0, 1.98, 2.02])}
    trend = stats.read_trend(points)
    assert trend.word == "grew"  # 1.50 -> 1.49 is flat, not a step down, but the reading names it
    assert "at every step" not in trend.text and "256: 1.50x to 512: 1.49x" in trend.text
    points[512] = R([1.6, 1.58, 1.62])
    assert "grew with the context at every step" in stats.read_trend(points).text
    points[512] = R([1.2, 1.18, 1.22])  # a real step down: no consistent trend
    assert "not one way" in stats.read_trend(points).text
    assert "with the rows" in stats.read_trend({1: R([1.0]), 2: R([2.0])}, along="the rows").text
    # each step back inside the 5% threshold, but together 5.3% behind the peak: not one way (chapter 3's H200 run)
    rows = {1: R([1.64]), 256: R([1.80]), 512: R([1.76]), 1024: R([1.705]), 4096: R([1.80])}
    assert "not one way" in stats.read_trend(rows, along="the rows").text
    rows[1024] = R([1.72])  # 4.4% behind the peak: flat steps, and the trend stands
    assert stats.read_trend(rows, along="the rows").word == "grew"


def test_a_flat_line_is_told_from_one_that_moved_both_ways():
    """Chapter 7's flat predictions: "no consistent trend" is flat only when no step between neighbours went beyond
    the noise threshold and no point lies beyond it from another (its H200 run: 30.1, 23.2, 19.8, 33.1 wall ms, a
    fall and a rise, is not flat but moved both ways)."""
    R = Ratio.of
    both_ways = stats.read_trend({128: R([30.1]), 256: R([23.2]), 512: R([19.8]), 1024: R([33.1])}, unit="ms")
    assert both_ways.word == "no consistent trend" and not both_ways.flat and both_ways.both_ways
    flat = stats.read_trend({128: R([30.1]), 256: R([29.5]), 512: R([30.4]), 1024: R([30.0])}, unit="ms")
    assert flat.word == "no consistent trend" and flat.flat and not flat.both_ways
    grew = stats.read_trend({128: R([30.0]), 256: R([31.0]), 512: R([32.0]), 1024: R([33.0]), 2048: R([34.0])})
    assert grew.word == "grew" and not grew.flat  # small steps that add up to a trend: not flat either
    # a steady rise inside wide quartiles: no consistent trend, and neither flat nor both ways
    wide = {L: R([m * 0.8, m, m * 1.2]) for L, m in ((128, 30.0), (256, 31.4), (512, 32.9), (1024, 34.4))}
    rising = stats.read_trend(wide, unit="ms")
    assert rising.word == "no consistent trend" and not rising.flat and not rising.both_ways
    # one step up beyond the noise, the rest flat, inside wide quartiles: moved, but not both ways
    one_step = {L: R([m * 0.8, m, m * 1.2]) for L, m in ((128, 30.0), (256, 33.0), (512, 33.5), (1024, 34.0))}
    assert not stats.read_trend(one_step, unit="ms").both_ways


def test_a_step_through_a_noisy_point_is_held_to_that_point_s_floor():
    """Chapter 7's H200 run: the ratio went 4.70, 5.00, 4.53, 4.51 with the 256-token point's A/A floor at 1.172
    (a 34% threshold): its +6.4% and -9.4% steps are noise by that point's own verdict, so the line is flat, not
    'moved both ways'; with a quiet floor there the same steps are beyond the ends' 5%."""
    R = Ratio.of
    points = {128: R([4.70]), 256: R([5.00]), 512: R([4.53]), 1024: R([4.51])}
    floors = {128: R([1.015]), 256: R([1.172]), 512: R([0.981]), 1024: R([1.003])}
    noisy = stats.read_trend(points, floors)
    assert noisy.word == "no consistent trend" and noisy.flat and not noisy.both_ways
    quiet = stats.read_trend(points, {**floors, 256: R([1.0])})
    assert not quiet.flat and quiet.both_ways
    # a trend's step back inside a noisy point's wider threshold is named with that threshold
    rising = {128: R([1.0]), 256: R([1.5]), 512: R([1.4]), 1024: R([2.0])}
    trend = stats.read_trend(rising, {128: R([1.0]), 256: R([1.0]), 512: R([1.1]), 1024: R([1.0])})
    assert trend.word == "grew" and "stayed inside the noise threshold (20%)" in trend.text
    assert "the point at 512 held to its own A/A floor's wider threshold (20%)" in trend.text
    # a move between two quiet points is read across a noisy one between them
    loud = {128: R([1.0]), 256: R([1.2]), 512: R([1.0]), 1024: R([1.0])}
    fell = stats.read_trend({128: R([1.00]), 256: R([1.30]), 512: R([0.95]), 1024: R([1.50])}, loud)
    assert fell.word == "no consistent trend" and fell.both_ways  # 128 -> 512 fell 5.3% between quiet points
    dip = stats.read_trend({128: R([1.00]), 256: R([1.10]), 512: R([0.92]), 1024: R([1.00])}, loud)
    assert dip.both_ways and not dip.flat


def test_a_median_prints_to_its_quartiles_digits():
    assert Ratio(1.0048, 0.983, 1.017, []).median_text == "1.005"  # not 1.00 beside 0.983-1.017
    assert Ratio(1.10, 1.05, 1.15, []).median_text == "1.10"
    assert Ratio(0.176, 0.175, 0.177, []).median_text == "0.176"


def test_the_noisier_floor_is_the_one_furthest_from_1():
    R = Ratio.of
    near, below, above = R([1.01]), R([0.88]), R([1.1])
    assert stats.noisier_floor([near, None, below, above]) is below  # 12% below 1 beats 10% above it
    assert stats.noisier_floor([None]) is None and stats.noisier_floor([]) is None


@pytest.mark.parametrize("values, floor, reason", [
    ([1.02, 1.01, 1.03], None, "smallest real effect (5%)"),
    ([1.10, 1.09, 1.11], [1.08, 1.07, 1.09], "twice the A/A floor's distance from 1 (16%)"),
    ([1.5, 0.9, 2.1, 0.8], None, "lie on both sides of 1"),
])
def test_a_within_noise_verdict_says_which_rule_held_it_back(values, floor, reason):
    v = stats.verdict(Ratio.of(values), Ratio.of(floor) if floor else None)
    assert v.text == "within noise" and reason in v.reason
    assert stats.verdict(Ratio.of([2.0, 1.9, 2.1])).reason == ""
