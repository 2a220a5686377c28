"""slower_harness.budget: the launch budget, per swap, per kind of module call, and replayed from a CUDA graph."""
import dataclasses

import pytest

from slower_harness import budget, clocks, env
from slower_harness.budget import DecodeProfile


def _profile(launches, ours, busy, wall):
    return DecodeProfile(launches, busy, wall, None, ours, 16)


def test_launch_budget_model_on_made_up_numbers():
    # 15 us per PyTorch launch, 40 us per launch of ours, GPU time on top
    launch_budget = budget.LaunchBudget(torch_us=15.0, ours_us=40.0, fitted_on=("original", "a loop of our calls"))
    original = _profile(1600, 0, 3.0, 1600 * 15e-3 + 3.0)
    judged = _profile(1000, 200, 2.0, 800 * 15e-3 + 200 * 40e-3 + 2.0)
    assert launch_budget.predict_ms(original) == pytest.approx(original.wall_ms_per_token)
    assert launch_budget.host_ms(judged) == pytest.approx(20.0)
    assert launch_budget.predict_ms(judged) == pytest.approx(22.0)


def test_module_budget_on_made_up_numbers():
    """Each swap adds our call's price alone minus the replaced call's, x 1.2 in the model; max(host, GPU)."""
    P = budget.ModulePrice
    original = DecodeProfile(1600, 3.0, 24.0, None, 0, 16,
                             modules={"Linear": P(200, 10.0, 1.0), "Norm": P(100, 50.0, 6.0)})
    custom = DecodeProfile(900, 10.0, 24.0 + 1.2 * (200 * 90e-3 + 100 * -10e-3), None, 300, 16,
                           modules={"OurLinear": P(200, 100.0, 1.0, twin="Linear"),
                                    "OurNorm": P(100, 40.0, 1.0, twin="Norm")})
    judged = DecodeProfile(1500, 1.0, 0.0, None, 100, 16, modules={"OurNorm": P(100, 40.0, 1.0, twin="Norm")})
    fitted = budget.fit_module_budget({"original": original, "custom": custom, "judged": judged},
                                      ("original", "custom"))
    assert fitted.base_ms == 24.0 and fitted.in_situ == pytest.approx(1.2)
    assert fitted.swapped_ms(custom) == pytest.approx(17.0)
    assert fitted.added_ms(custom.modules["OurLinear"]) == pytest.approx(200 * 90e-3)  # one kind's share of it
    assert fitted.added_ms(custom.modules["OurNorm"]) == pytest.approx(100 * -10e-3)
    with pytest.raises(ValueError, match="price: the original's 'Attention' was not priced"):
        fitted.added_ms(P(28, 80.0, 9.0, twin="Attention"))
    assert fitted.predict_ms(custom) == pytest.approx(custom.wall_ms_per_token)  # the fit reproduces itself
    assert fitted.predict_ms(original) == pytest.approx(24.0)  # nothing swapped: the original's own time
    host = 24.0 - 1.2 * 100 * 10e-3  # a norm of ours 10 µs cheaper alone than the one it replaced
    assert fitted.host_ms(judged) == pytest.approx(host) and fitted.predict_ms(judged) == pytest.approx(host)
    busy = DecodeProfile(200, 50.0, 0.0, None, 0, 16)
    assert fitted.predict_ms(busy) == 50.0  # the GPU's time wins where it is the longer
    assert fitted.implied_in_situ(original) is None
    assert fitted.implied_in_situ(judged) is None  # its swaps save 1 ms of 24 at prices alone: too little to read
    big = dataclasses.replace(judged, wall_ms_per_token=12.0, modules={"OurNorm": P(100, -70.0, 1.0, twin="Norm")})
    assert fitted.implied_in_situ(big) == pytest.approx((12.0 - 24.0) / (100 * -120e-3))


def test_module_budget_refuses_what_it_cannot_fit():
    P = budget.ModulePrice
    original = DecodeProfile(1600, 3.0, 24.0, None, 0, 16, modules={"Linear": P(200, 10.0, 1.0)})
    priced = DecodeProfile(2000, 5.0, 60.0, None, 300, 16, modules={"A": P(200, 100.0, 3.0, twin="Linear")})
    with pytest.raises(ValueError, match=r"fitted_on\[0\]: 'b' calls modules of ours"):
        budget.fit_module_budget({"a": original, "b": priced}, ("b", "a"))
    with pytest.raises(ValueError, match=r"fitted_on\[1\]: 'c' has no priced module of ours"):
        budget.fit_module_budget({"a": original, "c": original}, ("a", "c"))
    unpriced = DecodeProfile(1600, 3.0, 24.0, None, 0, 16)
    with pytest.raises(ValueError, match=r"fitted_on\[0\]: 'u' has no priced module"):
        budget.fit_module_budget({"u": unpriced, "b": priced}, ("u", "b"))
    even = DecodeProfile(2000, 5.0, 60.0, None, 300, 16, modules={"A": P(200, 10.0, 3.0, twin="Linear")})
    with pytest.raises(ValueError, match=r"change the original's time by less than 5% at prices alone \('a'\)"):
        budget.fit_module_budget({"a": original, "e": even}, ("a", "e"))
    with pytest.raises(ValueError, match="fitted_on: name two of"):
        budget.fit_module_budget({"a": original}, ("a",))
    backwards = dataclasses.replace(priced, wall_ms_per_token=20.0)  # swaps add 18 ms alone, yet it came out faster
    with pytest.raises(ValueError, match="no positive factor fits"):
        budget.fit_module_budget({"a": original, "w": backwards}, ("a", "w"))
    fitted = budget.fit_module_budget({"a": original, "b": priced}, ("a", "b"))
    stranger = DecodeProfile(2000, 5.0, 60.0, None, 300, 16, modules={"N": P(100, 9.0, 1.0, twin="Norm")})
    with pytest.raises(ValueError, match=r"the original's \['Norm'\] were not priced"):
        fitted.predict_ms(stranger)


def test_a_graph_step_takes_its_kernels_time_plus_one_gap_per_kernel():
    assert budget.graph_step_ms(1.25, 500, 0.5) == pytest.approx(1.5)
    assert budget.graph_step_ms(1.25, 500, -0.1) == pytest.approx(1.2)  # a negative gap: the profile covers it
    for bad in (None, float("nan"), True):
        with pytest.raises(ValueError, match="gap_us must be a finite number"):
            budget.graph_step_ms(1.25, 500, bad)
    with pytest.raises(ValueError, match="must be >= 0"):
        budget.graph_step_ms(-1.0, 500, 0.5)
    with pytest.raises(ValueError, match="kernels must be a positive int"):
        clocks.graph_kernel_gap_us(0)
    gap = clocks.graph_kernel_gap_us(50)
    if env.HAS_GPU:  # a kernel boundary in a graph costs well under the host's price of a launch
        assert -1.0 < gap < 5.0
    else:
        assert gap is None
