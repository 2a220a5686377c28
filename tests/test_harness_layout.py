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


PURE = ("specs", "formats", "stats")


@pytest.mark.parametrize("module", PURE)
def test_the_pure_modules_need_only_the_standard_library(module):
    mine = imports(module) - {f"slower_harness.{m}" for m in PURE}  # and each other
    third_party = {n.split(".")[0] for n in mine} - set(sys.stdlib_module_names) - {"__future__"}
    assert not third_party, f"slower_harness/{module}.py imports {sorted(third_party)}: it is pure Python"


def test_helpers_re_exports_what_the_chapters_call():
    import helpers
    from slower_harness import compare, formats, specs, stats

    for name in ("Ratio", "verdict", "verdict_line", "read_trend", "MIN_EFFECT"):
        assert getattr(helpers, name) is getattr(stats, name)
    for name in ("fmt", "table_number", "count_label", "bytes_label", "plain_number", "versus"):
        assert getattr(helpers, name) is getattr(formats, name)
    for name in ("compare_configs", "capture_prices", "profile_configs", "compare_calls", "ORIGINAL"):
        assert getattr(helpers, name) is getattr(compare, name)
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


FACADE_LINES = 200
EARLY = ("triton", "slower_kernels", "matplotlib")  # what must load after env has set Triton's and matplotlib's mode


def test_helpers_is_a_facade_of_re_exports():
    """helpers.py holds no logic: imports only (no def, class or assignment), within FACADE_LINES lines, and every
    name it imports comes from slower_harness."""
    source = (ROOT / "helpers.py").read_text()
    assert len(source.splitlines()) <= FACADE_LINES
    tree = ast.parse(source)
    for node in tree.body[1:]:  # after the docstring
        assert isinstance(node, ast.ImportFrom), f"helpers.py line {node.lineno}: {type(node).__name__}, not a re-export"
        assert node.module == "__future__" or node.module.startswith("slower_harness."), node.module


def test_helpers_re_exports_only_public_names_and_each_once():
    tree = ast.parse((ROOT / "helpers.py").read_text())
    names = [a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module != "__future__"
             for a in n.names]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert not [n for n in names if n.startswith("_")], "helpers re-exports private names"


@pytest.mark.parametrize("module", MODULES)
def test_env_loads_before_triton_and_matplotlib(module):
    """Triton's interpreter (CPU mode) must be on before any @triton.jit function is defined, and matplotlib's backend
    chosen before pyplot loads: a module that imports either, or slower_kernels, imports env first."""
    order = []
    for node in ast.parse((PACKAGE / f"{module}.py").read_text()).body:
        if isinstance(node, ast.Import):
            order += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            order += [f"{node.module}.{a.name}" for a in node.names]
    early = [i for i, name in enumerate(order) if name.split(".")[0] in EARLY]
    if early and module != "env":
        assert "slower_harness.env" in order and order.index("slower_harness.env") < min(early), \
            f"slower_harness/{module}.py imports {order[min(early)]} before slower_harness.env"


@pytest.mark.parametrize("module", MODULES)
def test_imports_are_declared_at_the_top(module):
    """What a module needs is declared at its top; an import inside a function only for an optional dependency
    (IPython, in a notebook) or in env, whose imports wait for its own setup."""
    allowed = ({"IPython", "IPython.display", "matplotlib", "transformers", "triton"} if module == "env"
               else {"IPython.display"})
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    inner = {(a.name if isinstance(n, ast.Import) else n.module) for f in ast.walk(tree)
             if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
             if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert inner <= allowed, f"slower_harness/{module}.py imports {sorted(inner - allowed)} inside a function"
