"""A Ray runner's workers have imported what a block needs once the runner has started
(tfx-bsl's coders, seqline's components: ~0.7 s of CPU each), as the local runner's fork
server preloads them: not in their first block, inside the first stage's seconds."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration
# A Ray of its own, one worker: what that worker has imported as soon as the runner is made,
# asked by a task defined here (shipped by value: it imports nothing of seqline).
DRIVER = """\
import sys
import ray
from seqline.orchestration.runners.ray import RayRunner
runner = RayRunner(workers=1)
@ray.remote(num_cpus=1)
def loaded():
    wanted = ("tfx_bsl.coders.example_coder", "seqline.components", "seqline.pipeline.tasks")
    return sorted(name for name in wanted if name in sys.modules)
print("LOADED", ray.get(loaded.remote()), flush=True)
runner.close()
"""


def test_ray_workers_import_what_blocks_need_before_the_first_block():
    done = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("LOADED "))
    assert ast.literal_eval(line[len("LOADED "):]) == [
        "seqline.components", "seqline.pipeline.tasks", "tfx_bsl.coders.example_coder"]
