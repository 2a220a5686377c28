"""The repository's top-level modules must not shadow a module that Python or an installed package provides.

Every chapter puts the repository root first on ``sys.path``. A folder there named like a package that a
dependency imports wins over the real one: transformers 5.25 imports Hugging Face's ``kernels`` as soon as a
model module loads, and found this repository's former ``kernels/`` instead (an ImportError in every chapter).
"""
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


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


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's import order matters without a GPU")
def test_importing_triton_before_the_interpreter_is_set_is_a_clear_error():
    """Triton reads TRITON_INTERPRET when first imported (a transformers model module imports it): kernels
    defined after that fail inside the interpreter with an obscure error (Triton 3.8), so it is refused."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    late = subprocess.run([sys.executable, "-c", "import triton, slower_kernels"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert late.returncode != 0 and "Import helpers or slower_kernels before transformers or triton" in late.stderr
    early = subprocess.run([sys.executable, "-c", "import slower_kernels, triton"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    assert early.returncode == 0, early.stderr


def test_a_chapter_s_setup_sets_the_interpreter_before_any_import(monkeypatch):
    """colab_setup.prepare() runs first in every chapter: without a GPU (or in CPU mode) it sets TRITON_INTERPRET."""
    import colab_setup

    monkeypatch.setattr(colab_setup, "missing_requirements", lambda *a, **k: [])
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("SLOWER_MODE", "cpu")
    colab_setup.prepare()
    assert os.environ["TRITON_INTERPRET"] == "1"
