"""The benchmark scripts run with benchmarks/ first on sys.path: a script named like a module
of the standard library shadows it for every script there (a `profile.py` broke Beam's
`import cProfile` in compare.py's peers)."""

import sys

from tests.conftest import REPO


def test_no_benchmark_script_shadows_the_standard_library():
    names = {path.stem for path in (REPO / "benchmarks").glob("*.py")}
    assert names & sys.stdlib_module_names == set()
