"""Shared fixtures: the user-function folder, a session Ray, and runners by name; the order
in which `make test`'s workers take the tests (decision 48)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Generator
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


def pytest_configure(config: pytest.Config) -> None:
    """seqline's own folder ($SEQLINE_HOME: an object-store root's default run store, scratch
    space) is one of the session's, never the user's ~/.seqline: runs on S3 roots left a
    store there at every test run. The commands tests start inherit it; a test that sets
    its own (monkeypatch) still does."""
    if "SEQLINE_HOME" not in os.environ:
        home = tempfile.mkdtemp(prefix="seqline-home-")
        os.environ["SEQLINE_HOME"] = home
        config.add_cleanup(lambda: shutil.rmtree(home, ignore_errors=True))


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole session (starting Ray takes seconds): 2 CPUs, as the box.
    Its own (address "local"), never a cluster `ray start` left on the machine: ray.init()
    joins the one its /tmp/ray/ray_current_cluster names, even a stale one."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False,
                     logging_level="WARNING")
        except Exception:  # noqa: BLE001 - Ray raises a bare Exception for this
            # Ray gives its raylet 30 s to register (a constant in ray/_private/node.py): on
            # 2 cores at a load average of 7 it once did not, and every Ray test of that
            # worker failed at set-up. Once more, from scratch, before giving up.
            ray.shutdown()
            ray.init(address="local", num_cpus=2, include_dashboard=False,
                     logging_level="WARNING")
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



# -- how `make test`'s workers share the suite (pytest-xdist; decision 48) -----------------

# Modules (or one test's parameters) that share an expensive module or session fixture: the
# tests of one entry run on one worker, so the fixture is made once (a module that uses one
# and is missing here fails tests/unit/test_shared_fixtures.py). Named by test id, all
# that a scheduler sees (pytest-xdist's own `xdist_group` mark does nothing on pytest 9.2:
# it renames `item._nodeid`, which pytest no longer reads).
SHARED = {
    "tests/dashboard/test_accounting.py": "accounting",  # a run's recorded events
    "tests/dashboard/test_browser.py": "dashboard runs",  # `root`: a minute of real runs
    "tests/dashboard/test_http.py": "dashboard runs",
    "tests/dashboard/test_logs_browser.py": "dashboard runs",
    "tests/dashboard/test_logs_http.py": "dashboard runs",
    "tests/dashboard/test_people.py": "dashboard runs",
    "tests/dashboard/test_seq_lookup.py": "dashboard runs",  # the demo's run in `root`
    "tests/dashboard/test_run_at_a_glance.py": "at a glance",  # a run held 8 s on one block
    "tests/dashboard/test_runs_queries.py": "10,000 runs",  # a store seeded with them
    "tests/dashboard/test_object_store.py": "dashboard on s3",  # a bucket with a run
    "tests/dashboard/test_pages_agree.py": "pages agree",  # two runs and their site
    "tests/dashboard/test_profile.py": "profiles",  # two runs of a small pipeline
    "tests/dashboard/test_truth.py": "truth",  # three runs of the demo
    "tests/e2e/test_backfill_outcome.py": "failed backfill",  # a backfill of two failed runs
    "tests/e2e/test_divergence.py": "divergence",  # three runs of the demo, one epoch
    "tests/e2e/test_forked_commands.py": "forked commands",  # a root with a run
    "tests/e2e/test_readers_never_create.py": "readers",  # a root with a run
    "tests/e2e/test_run_logs.py": "run logs",  # a failed run
    "tests/e2e/test_run_id_cli.py": "run ids",  # a root with a run
    "tests/e2e/test_terminal_tables.py": "tables",  # two runs and a schedule
    "tests/e2e/test_verify.py": "verify",  # a root with a run
    "tests/integration/test_assembly_line.py": "line",  # the line on four runners
    "tests/integration/test_data_stages.py": "data stages",  # the data stages, each runner
    "tests/integration/test_faults.py::test_worker_killed_mid_tfrecord_write_costs_a_retry":
        "faults: tfrecord_write",  # `quiet`: a 300,000-row run
    "tests/integration/test_object_store.py": "object store",  # a local reference run
    "tests/integration/test_ray_cluster.py": "ray cluster",  # a two-node cluster
    # one PostgreSQL server (initdb and a start: seconds of CPU) for the three
    "tests/integration/test_runs_pages_postgres.py": "postgres",
    "tests/integration/test_scheduler_store.py": "postgres",
    "tests/integration/test_store_postgres.py": "postgres",
    "tests/integration/test_training.py": "training",  # the example on three runners
    "tests/unit/test_store.py": "store",  # a real run
}


def _start_order(item: pytest.Item) -> int:
    """Longest first: the slow tier (minutes of clocks and child processes), then the shared
    modules (each a unit of work), then the engine and CLI tiers, then the unit tests."""
    if item.get_closest_marker("slow"):
        return 0
    if item.nodeid.split("::")[0] in SHARED or item.nodeid.split("[")[0] in SHARED:
        return 1
    if any(item.get_closest_marker(m) for m in ("integration", "e2e", "browser")):
        return 2
    return 3


CPU_AT_START = pytest.StashKey[float]()
STARTED = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """This process's CPU seconds and its finished child processes'."""
    return sum(os.times()[:4])


def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[CPU_AT_START] = _cpu_seconds()
    item.stash[STARTED] = time.time()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                         pytest.TestReport]:
    """Record each test's CPU seconds (set-up to teardown, child processes included) as a
    JUnit property: on two cores the suite is bound by CPU rather than by waiting, and this
    says which tests spend it (tests/tier_times.py sums them per tier). A test that timed out
    (pytest-timeout) says what each process under it was doing: a hung run's stacks, in the
    report of the CI run it hung in (tests/stacks.py)."""
    if call.when == "teardown" and CPU_AT_START in item.stash:  # before the report is made
        spent = _cpu_seconds() - item.stash[CPU_AT_START]
        item.user_properties.append(("cpu", f"{spent:.2f}"))
        # When and where it ran: with the kernel's process accounting (each process's
        # parent, start and CPU), tests/tier_times.py --pacct charges every process the
        # test started, daemons and killed workers too, to the test.
        item.user_properties += [("pid", str(os.getpid())),
                                 ("t0", f"{item.stash[STARTED]:.2f}"),
                                 ("t1", f"{time.time():.2f}")]
    report = yield
    if call.excinfo is not None and "Timeout (>" in str(call.excinfo.value):
        from tests.stacks import dump_descendants

        report.sections.append(("stacks of the processes under the test", dump_descendants()))
    return report


@pytest.hookimpl(trylast=True)  # after the other conftests have marked their tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Workers take tests in collection order as they free up, and a 4-minute test taken
    last would be the suite's tail: sort longest first. The sort is stable, so a module's
    tests stay together and a run without workers is as deterministic as before."""
    items.sort(key=_start_order)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """With `-n N`: pytest-xdist's scope scheduling, a scope being one test, one SHARED
    entry or one docs page, handed out in collection order (longest first) rather than
    largest scope first."""
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtures(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path, function = nodeid.split("::")[0], nodeid.split("[")[0]
            if not path.endswith(".py"):  # a docs page: its examples share a folder, in order
                return path
            return SHARED.get(path) or SHARED.get(function) or nodeid

    config.option.loadscopereorder = False
    return SharedFixtures(config, log)  # type: ignore[arg-type]
