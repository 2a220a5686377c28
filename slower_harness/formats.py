"""Every number format of the series, in one place: a number in a table (``table_number``) or a line (``fmt``), a
time ratio read both ways (``versus``), counts and sizes in binary units (``count_label``, ``bytes_label``), a tick
label as a reader writes it (``plain_number``), and how many decimal places keep a value apart from a bar it sits
beside (``places_apart``). Pure Python: no torch, nothing run at import."""
from __future__ import annotations

import math


def versus(a: float, b: float) -> str:
    """How time ``a`` compares with time ``b``: '1.23x slower', '12x faster', whichever way it went."""
    r = a / b if a > b else b / a
    return (f"{r:.0f}x" if r >= 10 else f"{r:.2f}x") + (" slower" if a > b else " faster")


def fmt(value, digits: int = 3, unit: str = "") -> str:
    """A number for a table or a line of text, or ``n/a (CPU)`` where this machine cannot measure it."""
    if value is None:
        return "n/a (CPU)"
    return f"{value:.{digits}f}" + (f" {unit}" if unit else "")


def places_apart(value: float, edges, places: int = 2, most: int = 4) -> int:
    """The decimal places to print ``value`` with: ``places``, or more (up to ``most``) where it would print as one of
    ``edges`` (a bar, a threshold) that it does not equal: 1.197 must not read 1.20 beside a 20% bar."""
    while places < most and any(value != e and f"{value:.{places}f}" == f"{e:.{places}f}" for e in edges):
        places += 1
    return places


def table_number(value) -> str:
    """A number as a table shows it: counts without a decimal point (1,655), others to four significant
    digits without exponents where that stays readable (186.6, 0.001819, 37.02), "-" for a missing one."""
    if value is None or value != value:
        return "-"
    v = float(value)
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    if abs(v) >= 1e4:
        return f"{v:,.0f}"
    if abs(v) >= 1e-4:
        digits = max(0, 3 - int(math.floor(math.log10(abs(v)))))
        return f"{v:.{digits}f}"
    return f"{v:.3g}"


def count_label(n) -> str:
    """A count in binary units, for ticks: 256, 1K, 16K, 4M (K = 1024, M = 1024**2)."""
    n = int(n)
    for unit, size in (("M", 2**20), ("K", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def bytes_label(n: float) -> str:
    """A size in binary units, for a table or a figure: 512 B, 1.5 KiB, 40 MiB, 141 GiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.0f} {unit}" if n / size >= 10 else f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def plain_number(value, _pos=None, view=None) -> str:
    """A tick label as a reader writes the number: 128, 0.05, 4096. Powers of ten become 10^k outside
    1e-4..1e5, and on every tick of an axis whose ``view`` (its limits) reaches beyond that range."""
    if value == 0:
        return "0"
    size = abs(value)
    exponent = math.log10(size)
    decade = abs(exponent - round(exponent)) < 1e-9
    limits = [abs(v) for v in (view if view is not None else ()) if v != 0]  # a symlog axis may reach 0
    beyond = bool(limits) and (min(limits) < 1e-4 or max(limits) >= 1e5)
    if decade and (beyond or not 1e-4 <= size < 1e5):
        return ("-" if value < 0 else "") + f"$10^{{{round(exponent)}}}$"
    if 1e-4 <= size < 1e5:
        return f"{value:.6g}"
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.3g}"
