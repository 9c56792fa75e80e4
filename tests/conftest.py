"""Shared fixtures: the user-function folder, a session Ray, and runners by name."""

from __future__ import annotations

from pathlib import Path

import pytest

USERFNS = Path(__file__).parent / "userfns"
REPO = Path(__file__).parent.parent

# Every runner configuration the contract suite covers. Beam runs both FnApiRunner modes:
# in_memory (one thread, the common dev loop) and multi_processing (real worker processes).
RUNNER_CASES = {
    "local": ("local", {}),
    "local-thread": ("local", {"mode": "thread"}),
    "beam-in_memory": ("beam", {"mode": "in_memory"}),
    "beam-multi_processing": ("beam", {"mode": "multi_processing"}),
    "ray": ("ray", {}),
}


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole session (starting Ray takes seconds): 2 CPUs, as the box."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


@pytest.fixture(params=list(RUNNER_CASES), ids=list(RUNNER_CASES))
def runner_factory(request):
    """Build runners of one configuration; closes them after the test."""
    name, options = RUNNER_CASES[request.param]
    if name == "ray":
        request.getfixturevalue("ray_session")
    from seqline.orchestration.runners import make_runner

    made = []

    def make(**overrides):
        runner = make_runner(name, **{**options, **overrides})
        made.append(runner)
        return runner

    make.case = request.param
    yield make
    for runner in made:
        runner.close()
