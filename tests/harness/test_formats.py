"""slower_harness.formats: every number format (a ratio both ways, a line, a table, places kept off a bar)."""
import pytest

from slower_harness import formats


@pytest.mark.parametrize("a, b, text", [(2.0, 1.0, "2.00x slower"), (1.0, 4.0, "4.00x faster"),
                                        (30.0, 2.0, "15x slower")])
def test_versus_says_which_way(a, b, text):
    assert formats.versus(a, b) == text


def test_fmt_says_where_a_number_cannot_be_measured():
    assert formats.fmt(None, 2, "ms") == "n/a (CPU)"
    assert formats.fmt(1.23456, 2, "ms") == "1.23 ms"
    assert formats.fmt(1655.4, 0) == "1655"
    assert formats.fmt(1.23456) == "1.235"  # 3 digits, no unit


@pytest.mark.parametrize("value, edges, places, most, expected", [
    (1.197, (1.2,), 2, 4, 3),         # 1.20 would read as the 20% bar
    (1.2, (1.2,), 2, 4, 2),           # the bar itself prints as the bar
    (1.0499, (1.05, 1 / 1.05), 3, 6, 4),   # 1.050 would read as the 5% threshold: 1.0499
    (1.31, (1.2,), 2, 4, 2),          # far from the edge: the places asked for
    (1.2000001, (1.2,), 2, 4, 4),     # never beyond ``most``
])
def test_places_apart_widens_a_value_off_its_edges(value, edges, places, most, expected):
    assert formats.places_apart(value, edges, places, most) == expected


@pytest.mark.parametrize("value, text", [(1655.0, "1,655"), (186.6087, "186.6"), (0.0070113, "0.007011"),
                                         (float("nan"), "-"), (None, "-"), (-0.0, "0"), (151936.4, "151,936"),
                                         (0.1807, "0.1807"), (float("inf"), "inf")])
def test_tables_write_counts_as_counts_and_missing_as_a_dash(value, text):
    assert formats.table_number(value) == text
