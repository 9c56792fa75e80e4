"""`seqline run --run-id X` (and `Pipeline.run(run_id=X)`) with an id that is not a name:
exit 2, one line saying the rule, and not a file written anywhere (the listing of the root's
parent is the same before and after), nor a run recorded."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import commands
from tests.conftest import REPO

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "docs" / "examples" / "readings"
PIPELINE = "docs/examples/readings/data-only.yaml"
RULE = r"run id {shown} is not a name; use letters, digits, '\.', '_' and '-' \(at most 128"
# (run id, how the one line shows it)
BAD = [("../evil", r"'\.\./evil'"), ("../../x", r"'\.\./\.\./x'"), ("/abs/x", r"'/abs/x'"),
       ("a/b", r"'a/b'"), ("a\x1bb", r"'a\\x1bb'"), ("a\nb", r"'a\\nb'"), (".", r"'\.'"),
       ("..", r"'\.\.'"), ("", r"''")]
IDS = [repr(b[0]) for b in BAD]


def _seqline(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return commands.seqline(*args, cwd=cwd)


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    """The root's parent: a copy of the example (as the README's path names it) and a root
    that already holds a run, so its store exists."""
    folder = tmp_path_factory.mktemp("parent")
    shutil.copytree(EXAMPLE, folder / "docs" / "examples" / "readings")
    done = _seqline(folder, "run", PIPELINE, "--root", "root", "--run-id", "good",
                    "--no-verify")
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.parametrize(("run_id", "shown"), BAD, ids=IDS)
def test_run_id_bad_one_exits_2_in_one_line_writing_nothing(parent, run_id, shown):
    before = _listing(parent)
    done = _seqline(parent, "run", PIPELINE, "--root", "root", "--run-id", run_id,
                    "--no-verify")
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(RULE.format(shown=shown), lines[0]), done.stderr
    assert _listing(parent) == before


# The run path checks the id before it opens the store: nothing is recorded, no root is made.
@pytest.mark.parametrize(("run_id", "shown"), BAD, ids=IDS)
def test_run_id_bad_one_is_not_recorded_and_makes_no_root(parent, run_id, shown):
    before = _listing(parent)
    done = _seqline(parent, "run", PIPELINE, "--root", "fresh-root", "--run-id", run_id)
    assert done.returncode == 2, done.stderr
    assert _listing(parent) == before  # not even the root
    listed = _seqline(parent, "runs", "list", "--root", "root", "--json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["good"]


@pytest.mark.parametrize("run_id", ["../x", "/abs/x", "a/b", ""])
def test_run_id_python_api_refuses_a_bad_one_before_anything(tmp_path, run_id):
    import seqline
    from seqline.pipeline.errors import ConfigError

    pipeline = seqline.Pipeline.from_yaml(EXAMPLE / "data-only.yaml")
    with pytest.raises(ConfigError, match=r"^run id .* is not a name; use letters"):
        pipeline.run(runner="local", root=tmp_path / "root", run_id=run_id)
    assert list(tmp_path.iterdir()) == []
