"""slower_harness.exercises: a reader's guess checked against a measured ratio with the verdict rule."""
import pytest

from slower_harness import exercises, stats
from slower_harness.stats import Ratio


@pytest.mark.parametrize("ratio, floor, word", [
    (Ratio.of([1.5, 1.6, 1.7]), None, "slower"),
    (Ratio.of([0.6, 0.62, 0.65]), None, "faster"),
    (1.03, None, "same"),  # inside the 5% minimum effect
    (Ratio.of([1.08, 1.1, 1.12]), Ratio.of([1.06, 1.07, 1.08]), "same"),  # inside twice the floor
    (Ratio.of([0.7, 0.9, 1.3, 1.4, 1.5]), None, "same"),  # quartiles on both sides of 1
])
def test_check_answer_judges_with_the_verdict(ratio, floor, word, capsys):
    assert exercises.check_answer(None, ratio, floor) == word
    assert "Set `answer`" in capsys.readouterr().out
    assert exercises.check_answer(word, ratio, floor, change="BLOCK_SIZE 128") == word
    assert "matches" in capsys.readouterr().out
    other = next(a for a in exercises.ANSWERS if a != word)
    exercises.check_answer(other, ratio, floor)
    assert f"does not match (measured: {word!r})" in capsys.readouterr().out
    with pytest.raises(ValueError, match="answer must be one of"):
        exercises.check_answer("quicker", ratio, floor)


def test_check_answer_shows_its_spread_and_warns_near_the_threshold(capsys):
    near = Ratio.of([1.04, 1.05, 1.06, 1.05])
    exercises.check_answer(None, near, Ratio.of([0.99, 1.0, 1.01, 1.0]), change="half the elements")
    out = capsys.readouterr().out
    assert "quartiles 1.048-1.053 over 4 rounds" in out and "A/A floor 1.000" in out
    assert "near the series' threshold (5% from 1)" in out
    exercises.check_answer(None, Ratio.of([1.9, 2.0, 2.1]), None)
    assert "near the series' threshold" not in capsys.readouterr().out
    # a floor 5% off 1 widens the threshold to 10%: the warning names that one, not the series' 5%
    exercises.check_answer(None, Ratio.of([1.06, 1.07, 1.08]), Ratio.of([1.04, 1.05, 1.06]))
    out = capsys.readouterr().out
    assert "within noise" in out and "near its threshold (10% from 1: twice its A/A floor's distance" in out
    # widened, yet it would print as the series' 5%: one decimal more, so it does not read as the minimum
    assert stats.threshold_pct(0.052) == "5.2%" and stats.threshold_pct(0.05) == "5%"
    assert stats.threshold_pct(0.108) == "11%"
    exercises.check_answer(None, Ratio.of([1.08, 1.1, 1.14]), None, change="x")  # one number, as the verdict writes it
    assert "x: 1.10x slower; quartiles 1.09-1.12" in capsys.readouterr().out
    exercises.check_answer(None, Ratio.of([0.51, 0.515, 0.52]), None, change="z")  # a speed-up: the time ratio too
    assert "z: time ratio 0.515 (1.94x faster); quartiles 0.512-0.518" in capsys.readouterr().out
    exercises.check_answer(None, Ratio.of([0.99, 1.01, 1.02]), None, change="y")  # within noise: the ratio and the rule
    assert "y: 1.01x the time (within noise; closer to 1 than" in capsys.readouterr().out
