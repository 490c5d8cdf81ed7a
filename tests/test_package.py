"""The package as installed: one version source, py.typed shipped, a public API that type checkers can read.

``rumimm/__init__.py`` names its lazy public names three times (``_LAZY`` for the
runtime, a ``TYPE_CHECKING`` block for type checkers, the literal ``__all__``);
these tests keep the three in step.
"""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
from pathlib import Path

import rumimm

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(rumimm.__file__).resolve().parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _init_tree() -> ast.Module:
    return ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """name -> module of every ``from M import name`` under ``if TYPE_CHECKING:``."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.dump(stmt)
                out.update({alias.name: stmt.module for alias in stmt.names})
    return out


def test_the_version_is_written_once_and_pyproject_reads_it_from_the_package():
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "rumimm._version.__version__"}
    assert rumimm.__version__ == importlib.metadata.version("rumimm")


def test_py_typed_is_in_the_package_and_its_package_data():
    assert (PACKAGE / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["rumimm"]


def test_all_is_a_literal_list_of_unique_names_each_importable():
    tree = _init_tree()
    assigned = [n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
    assert len(assigned) == 1
    names = ast.literal_eval(assigned[0].value)  # raises unless a literal
    assert isinstance(names, list) and len(names) == len(set(names)) == len(rumimm.__all__)
    assert names == rumimm.__all__
    for name in names:
        assert getattr(rumimm, name) is not None, name


def test_the_type_checking_imports_match_the_lazy_table():
    seen = _type_checking_imports(_init_tree())
    assert seen == rumimm._LAZY
    errors = {n for n in rumimm.__all__ if n.endswith(("Error", "Warning"))}
    eager = {"__version__", "build_blob", "validate", "Report", *errors}
    assert set(rumimm.__all__) == set(rumimm._LAZY) | eager


def test_the_all_extra_holds_every_optional_integration_and_test_leaves_torch_out():
    extras = PYPROJECT["project"]["optional-dependencies"]
    integrations = {"progress", "xarray", "dask", "geotiff", "preview", "catalog", "torch", "torchgeo", "remote",
                    "stac"}
    assert integrations <= set(extras)
    assert extras["all"] == [f"rumimm[{','.join(sorted(integrations, key=list(extras).index))}]"]
    assert not any("torch" in req for req in extras["test"])
