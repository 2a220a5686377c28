"""The harness package's shape: modules of one job, small, importing one way (down the order that
slower_harness/__init__.py lists), never back up to helpers; the pure ones without torch."""
import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "slower_harness"
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
MAX_LINES = 450


def listed_order() -> list[str]:
    """The modules in the order the package's architecture note lists them (``- ``name``: ...``)."""
    return re.findall(r"^- ``(\w+)``:", (PACKAGE / "__init__.py").read_text(), flags=re.M)


def imports(module: str) -> set[str]:
    """Top-level names of everything ``module`` imports, anywhere in its file."""
    names = set()
    for node in ast.walk(ast.parse((PACKAGE / f"{module}.py").read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module if node.level == 0 else f"slower_harness.{node.module}")
    return names


def test_the_architecture_note_lists_every_module_once():
    assert sorted(listed_order()) == MODULES and len(set(listed_order())) == len(listed_order())


@pytest.mark.parametrize("module", MODULES)
def test_a_module_is_small(module):
    lines = len((PACKAGE / f"{module}.py").read_text().splitlines())
    assert lines <= MAX_LINES, f"slower_harness/{module}.py has {lines} lines (at most {MAX_LINES}): split it"


@pytest.mark.parametrize("module", MODULES)
def test_imports_run_one_way(module):
    order = listed_order()
    mine = imports(module)
    assert not {n for n in mine if n.split(".")[0] == "helpers"}, f"{module} imports helpers: imports run one way"
    below = {f"slower_harness.{m}" for m in order[order.index(module):]}
    assert not mine & below, f"{module} imports {sorted(mine & below)}: itself or a module listed after it"


@pytest.mark.parametrize("module", ["specs", "stats"])
def test_the_pure_modules_need_only_the_standard_library(module):
    third_party = {n.split(".")[0] for n in imports(module)} - set(sys.stdlib_module_names) - {"__future__"}
    assert not third_party, f"slower_harness/{module}.py imports {sorted(third_party)}: it is pure Python"


def test_helpers_re_exports_what_the_chapters_call():
    import helpers
    from slower_harness import stats

    from slower_harness import specs

    for name in ("Ratio", "verdict", "verdict_line", "read_trend", "MIN_EFFECT", "table_number", "count_label"):
        assert getattr(helpers, name) is getattr(stats, name)
    for name in ("NOMINAL_GB_S", "NOMINAL_TFLOPS", "GPU_SPECS", "QWEN3_0_6B", "TINY_QWEN3"):
        assert getattr(helpers, name) is getattr(specs, name)


@pytest.mark.parametrize("module", MODULES)
def test_no_local_name_hides_an_imported_module(module):
    """A local ``env = {...}`` inside a function of a module that imports ``env`` would read the dict where the
    module was meant (it happened once: ``env.ROOT`` of a dict)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    modules = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "slower_harness"
               for a in n.names}
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assert not modules & stored, f"slower_harness/{module}.py assigns {sorted(modules & stored)}, a module it imports"
