"""The installed module itself: where it comes from, its version, and its stubs."""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
from pathlib import Path

import sinew
import sinew._sinew as native
from sinew_py_wheel import SOURCE, newest_wheel, wheel_version

STUB = SOURCE / "sinew" / "_sinew.pyi"


def test_imported_from_the_installed_wheel_not_the_source_tree():
    here = Path(sinew.__file__).resolve().parent
    assert here != SOURCE / "sinew", "the source tree shadows the installed wheel"
    assert "site-packages" in here.parts
    assert Path(native.__file__).resolve().parent == here


def test_version_is_the_newest_wheels():
    assert sinew.__version__ == importlib.metadata.version("sinew")
    wheel = newest_wheel()
    if wheel is not None:
        assert sinew.__version__ == wheel_version(wheel), "stale install: conftest should have reinstalled"
    assert isinstance(sinew.core_version, str) and sinew.core_version


def test_installed_stub_and_marker_are_the_sources():
    here = Path(sinew.__file__).resolve().parent
    assert (here / "py.typed").exists()
    assert (here / "_sinew.pyi").read_text() == STUB.read_text(), "stale wheel: rebuild with scripts/build_wheel.sh"


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def _public(name: str) -> bool:
    return not name.startswith("_") or name == "__version__"


def _stub_top_level() -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in _stub_tree().body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return {k: v for k, v in names.items() if _public(k)}


def test_stub_top_level_names_match_the_module():
    stub = set(_stub_top_level())
    module = {n for n in dir(native) if _public(n)}
    assert stub == module, f"only in stub: {stub - module}; only in module: {module - stub}"
    assert set(sinew.__all__) == module
    assert "_panic_for_tests" not in native.__all__


def _class_members_in_stub(node: ast.ClassDef) -> set[str]:
    out = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and (not item.name.startswith("_") or item.name in {"__len__", "__copy__", "__deepcopy__"}):
            out.add(item.name)
    return out


def _class_members_at_runtime(cls: type) -> set[str]:
    wanted = {"__len__", "__copy__", "__deepcopy__"}
    return {n for n in vars(cls) if not n.startswith("_") or n in wanted}


def test_stub_class_members_match_the_module():
    for name, node in _stub_top_level().items():
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(native, name)
        if issubclass(cls, BaseException):
            assert issubclass(cls, sinew.SinewError)
            continue
        stub = _class_members_in_stub(node)
        runtime = _class_members_at_runtime(cls)
        assert stub == runtime, f"{name}: only in stub: {stub - runtime}; only in module: {runtime - stub}"


def test_stub_functions_take_the_modules_parameters():
    for name, node in _stub_top_level().items():
        if isinstance(node, ast.FunctionDef):
            stub_params = [a.arg for a in node.args.args]
            runtime = list(inspect.signature(getattr(native, name)).parameters)
            assert stub_params == runtime, name
        if isinstance(node, ast.ClassDef) and not issubclass(getattr(native, name), BaseException):
            cls = getattr(native, name)
            for item in node.body:
                if not isinstance(item, ast.FunctionDef) or item.decorator_list or item.name.startswith("__"):
                    continue
                stub_params = [a.arg for a in item.args.args if a.arg != "self"]
                runtime = [p for p in inspect.signature(getattr(cls, item.name)).parameters if p != "self"]
                assert stub_params == runtime, f"{name}.{item.name}"
            # pyo3 classes are constructed by __new__, which is what the stub declares
            new = next((i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == "__new__"), None)
            if new is None:  # results (Solution, SequenceResult) are not constructible
                continue
            stub_params = [a.arg for a in new.args.args if a.arg != "cls"]
            runtime = list(inspect.signature(cls).parameters)
            assert stub_params == runtime, f"{name}.__new__"


def test_stub_all_is_the_modules():
    stub_all = next(
        ast.literal_eval(n.value) for n in _stub_tree().body
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
    )
    assert sorted(stub_all) == sorted(native.__all__)


def test_stubtest_if_mypy_is_installed():
    """mypy's stubtest compares the stub with the runtime module in depth (signatures, defaults,
    final classes); skipped where mypy is not installed."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("mypy.stubtest")
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "sinew._sinew"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_exception_hierarchy():
    assert issubclass(sinew.SinewError, ValueError)
    for name in ("RigError", "UnknownBoneError", "LimitError", "GoalError", "ShapeError", "NonFiniteError",
                 "SettingsError", "FormatError", "InternalError", "UnsupportedError"):
        cls = getattr(sinew, name)
        assert issubclass(cls, sinew.SinewError), name
        assert cls.__module__ == "sinew"


def test_package_docstring_example_runs():
    import doctest

    result = doctest.testmod(sinew)
    assert result.attempted > 0 and result.failed == 0


def test_every_public_function_has_its_own_docstring():
    """Each function's help says what it does (a doc comment once sat above the wrong function:
    ``methods`` showed ``analyze``'s text and ``analyze`` had none)."""
    assert sinew.methods.__doc__.startswith("The names of the IK methods")
    assert sinew.analyze.__doc__.startswith("The chain structure of `goals`")
    for name in ("methods", "analyze", "load_problem"):
        assert getattr(sinew, name).__doc__, name
