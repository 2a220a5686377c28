"""The repository's top-level modules must not shadow a module that Python or an installed package provides.

Every chapter puts the repository root first on ``sys.path``. A folder there named like a package that a
dependency imports wins over the real one: transformers 5.25 imports Hugging Face's ``kernels`` as soon as a
model module loads, and found this repository's former ``kernels/`` instead (an ImportError in every chapter).
"""
import importlib.metadata
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def top_level_names(root: Path) -> set[str]:
    """What ``import NAME`` finds at ``root``: modules (NAME.py) and folders holding Python code."""
    names = {p.stem for p in root.glob("*.py")}
    names |= {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.py"))}
    return names


def shadowed(names: set[str], installed: dict[str, list[str]], stdlib=frozenset()) -> dict[str, str]:
    """name -> what it hides: the installed distributions (``packages_distributions()``) or the standard
    library that provide a top-level module of that name."""
    out = {name: ", ".join(sorted(installed[name])) for name in names if name in installed}
    out.update({name: "the standard library" for name in names if name in stdlib})
    return out


def test_no_top_level_name_shadows_an_installed_package_or_the_standard_library():
    clash = shadowed(top_level_names(ROOT), importlib.metadata.packages_distributions(), sys.stdlib_module_names)
    assert not clash, f"top-level names of this repository hide what Python would import: {clash}"


def test_the_check_finds_a_clash(tmp_path):
    """The check can fail: a folder named like an installed package (or a stdlib module) is reported."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    (tmp_path / "json.py").write_text("")
    (tmp_path / "notes").mkdir()  # no Python code: nothing to import
    names = top_level_names(tmp_path)
    assert names == {"kernels", "json"}
    assert shadowed(names, {"kernels": ["kernels"], "yaml": ["PyYAML"]}, sys.stdlib_module_names) == {
        "kernels": "kernels", "json": "the standard library"}
