"""An S3-compatible server for tests: moto's, on a free loopback port, the one s3fs tests with.

ORCHESTRATION.md §5. The fixture exports the usual AWS variables (a dummy key, the region and
`AWS_ENDPOINT_URL`) so that this process, the workers it starts and any Ray node or CLI run
started afterwards find the server the way they would find real S3: from the environment.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

__all__ = ["S3", "s3_server", "s3_root"]


@dataclass(frozen=True)
class S3:
    endpoint: str  # http://127.0.0.1:PORT
    env: dict[str, str]  # what a child process needs to reach it

    def fs(self):
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        return s3fs.S3FileSystem(client_kwargs={"endpoint_url": self.endpoint})


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3]:
    """One moto server for the session; skips, saying why, where it cannot start."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:  # pragma: no cover - `make test` installs moto[server]
        pytest.skip(f"moto[server] is not installed ({exc}); `make test` installs it")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        yield S3(endpoint, env)
    server.stop()


@pytest.fixture
def s3_root(s3_server: S3) -> str:
    """A fresh bucket per test: `s3://test-<hex>/root`."""
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    s3_server.fs().mkdir(bucket)
    return f"s3://{bucket}/root"
