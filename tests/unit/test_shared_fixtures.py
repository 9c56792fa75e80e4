"""Every test module that uses an expensive module- or session-scoped fixture runs on one
`make test` worker (tests/conftest.py: SHARED), or says why its tests are spread.

Without it each worker that takes one of its tests makes the fixture again: the dashboard's
`root` (the demo run twice) was made by up to four workers for three modules missing from
SHARED, about 50 CPU-seconds of a suite bound by CPU (decision 48).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO, SHARED

TESTS = REPO / "tests"

# Module- or session-scoped fixtures cheap enough to make once per worker, or made by every
# worker on purpose: a Ray per worker is what `runner_factory` uses across a dozen modules.
CHEAP = {"browser", "ray_session", "s3_server", "s3_root", "moto_server"}

# Modules whose tests share a fixture but run on several workers on purpose.
SPREAD = {
    # Each row runs 10-70 s of real faults; spreading them is worth recomputing `calm` (an
    # undisturbed 3,000-row run, about 2 CPU-seconds) on each worker that takes one.
    "tests/integration/test_faults.py",
    # A module fixture that reads the demo's 1,461-row CSV into memory: milliseconds.
    "tests/unit/test_profile.py",
}


def _scope(decorator: ast.expr) -> str:
    """The scope of `@pytest.fixture(...)`: "function" unless it says otherwise."""
    if isinstance(decorator, ast.Call):
        for keyword in decorator.keywords:
            if keyword.arg == "scope" and isinstance(keyword.value, ast.Constant):
                return str(keyword.value.value)
    return "function"


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _asked(node: ast.AST) -> set[str]:
    """The fixtures a function asks for: its arguments, and `request.getfixturevalue("x")`."""
    asked = {a.arg for a in node.args.args} if isinstance(node, ast.FunctionDef) else set()
    for call in ast.walk(node):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "getfixturevalue" and call.args
                and isinstance(call.args[0], ast.Constant)):
            asked.add(str(call.args[0].value))
    return asked


def _defined(path: Path) -> dict[str, tuple[str, set[str]]]:
    """The fixtures a file defines, or imports from another file of tests/: name -> (scope,
    the fixtures it asks for)."""
    found: dict[str, tuple[str, set[str]]] = {}
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Attribute) and target.attr == "fixture":
                    found[node.name] = (_scope(decorator), _asked(node))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests."):
            source = REPO / (node.module or "").replace(".", "/")
            source = source.with_suffix(".py") if source.with_suffix(".py").exists() \
                else source / "__init__.py"
            theirs = _defined(source)
            found.update({a.asname or a.name: theirs[a.name] for a in node.names
                          if a.name in theirs})
    return found


def _visible(path: Path) -> dict[str, tuple[str, set[str]]]:
    """The fixtures a test module sees: its own first, then each conftest.py from its folder
    up to tests/ (pytest's order)."""
    fixtures = _defined(path)
    folder = path.parent
    while folder != TESTS.parent:
        if (folder / "conftest.py").exists():
            for name, fixture in _defined(folder / "conftest.py").items():
                fixtures.setdefault(name, fixture)
        folder = folder.parent
    return fixtures


def _uses(path: Path) -> set[str]:
    """The expensive wide fixtures `path`'s tests ask for, directly or through others."""
    fixtures = _visible(path)
    asked = set().union(*(_asked(node) for node in ast.walk(_tree(path))
                          if isinstance(node, ast.FunctionDef)))
    todo, seen = list(asked), set()
    while todo:
        name = todo.pop()
        if name in fixtures and name not in seen:
            seen.add(name)
            todo.extend(fixtures[name][1])
    return {name for name in seen
            if fixtures[name][0] in ("module", "session") and name not in CHEAP}


def test_every_module_sharing_an_expensive_fixture_runs_on_one_worker():
    missing = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        name = str(path.relative_to(REPO))
        used = _uses(path)
        if used and name not in SHARED and name not in SPREAD:
            missing[name] = sorted(used)
    assert missing == {}, ("add these to SHARED in tests/conftest.py (or to SPREAD here, "
                           f"saying why): {missing}")


def test_shared_names_only_modules_that_exist():
    assert [name for name in SHARED if not (REPO / name.split("::")[0]).exists()] == []
