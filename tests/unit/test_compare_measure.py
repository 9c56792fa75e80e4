"""The benchmarks' process-tree sampler reads the tree from /proc's children files (a few
reads a sample, where psutil reads every process on the machine, on the cores the measured
job needs): it must see the same processes and memory as psutil does."""

import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import compare_measure  # noqa: E402 - a script folder, not a package

# A parent whose child holds 150 MB, then both wait to be measured.
TREE = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'x = bytearray(150_000_000); import time; time.sleep(30)']); time.sleep(30)")


@pytest.mark.skipif(not compare_measure._CHILDREN_FILES, reason="no /proc children files")
def test_the_tree_sampler_sees_what_psutil_sees():
    proc = subprocess.Popen([sys.executable, "-c", TREE])
    try:
        tree = psutil.Process(proc.pid)
        deadline = time.monotonic() + 30
        while not tree.children() or tree.children()[0].memory_info().rss < 150_000_000:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        ours, theirs = {}, {}
        rss = compare_measure._sample_tree(tree, ours)
        assert rss == pytest.approx(compare_measure._sample_tree_psutil(tree, theirs), rel=0.02)
        assert rss > 150_000_000 and set(ours) == set(theirs) == {proc.pid, *(
            c.pid for c in tree.children(recursive=True))}
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()
