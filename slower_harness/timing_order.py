"""Time first, profile after: the order every host-clock timing keeps within one process.

Kineto, torch.profiler's engine, leaves NVIDIA's CUPTI attached to the process after a profile ends
(pytorch/pytorch#144455): its callbacks then add host time to every later kernel launch. ``PROFILED_BY`` notes what
profiled; a timing that a profile would slow refuses to run after it (``host_clock_free``), in every mode."""
from __future__ import annotations

# --- Time first, profile after -------------------------------------------------------------------
# Kineto, torch.profiler's engine, leaves NVIDIA's CUPTI attached to the process after a profile ends
# (pytorch/pytorch#144455): its callbacks then add host time to every later kernel launch. Measured on the H200,
# ten short profiles (six of one add, four of decode generations) made the original model's wall time per decoded
# token 16% longer (28.8 -> 33.5 ms) and the all-projections swap's tokens/s ratio 8% smaller (1.35 -> 1.24) in the
# same process. With Kineto's switch to detach it (TEARDOWN_CUPTI=1) set, test processes there hung at exit after
# their tests had passed, so the series does not rely on it. It times first and profiles after: every host-clock
# timing below refuses to run once this process has profiled (``profiled``), in every mode, so that the CPU run
# of the notebooks checks the order a GPU run needs.
PROFILED_BY: list[str] = []  # what profiled in this process, in order (on a GPU; in CPU mode, what would have)


def profiled(what: str) -> None:
    """Note that ``what`` ran torch.profiler in this process (or would have, on a GPU)."""
    if what not in PROFILED_BY:
        PROFILED_BY.append(what)


def before_any_profile(what: str, why: str) -> None:
    """Refuse a timing (``what`` says what it times) once this process has profiled; ``why`` says what the
    profile would do to it."""
    if PROFILED_BY:
        raise RuntimeError(
            f"{what}, but this process has already run torch.profiler ({', '.join(PROFILED_BY)}). {why} "
            "Time first, profile after: move the profiling below this timing (checked in every mode, CPU too), or, "
            "to time again after a chapter has run, restart the runtime (Colab: Runtime > Restart session).")


def host_clock_free(what: str) -> None:
    """Refuse a host-clock timing (``what``) once this process has profiled: CUPTI would slow what it times."""
    before_any_profile(f"{what} times the host's clock",
                        "After a profile NVIDIA's CUPTI stays attached and adds host time to every launch "
                        "(pytorch/pytorch#144455), so the timing would be slower than in a process that never profiled.")
