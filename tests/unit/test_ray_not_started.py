"""What a driver says when its Ray did not start (orchestration/runners/ray.py): one line that
says where Ray was and what to check."""

from __future__ import annotations

import socket

from seqline.orchestration.runners.ray import RayNotStarted, _unreachable


def test_a_cluster_that_answered_but_refused_the_driver_names_token_authentication(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    error = ConnectionError("Failed to connect to Ray cluster at 10.0.0.5:6379\nmore")
    said = str(RayNotStarted.of(error, "10.0.0.5:6379", None))
    assert "\n" not in said and "the cluster at 10.0.0.5:6379, whose port answers" in said
    assert "RAY_AUTH_MODE=token" in said
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # set: it is not what went wrong
    assert "RAY_AUTH_MODE" not in str(RayNotStarted.of(error, "10.0.0.5:6379", None))


def test_an_address_is_probed_only_when_it_names_a_host_and_port():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert _unreachable(f"127.0.0.1:{port}") is None
        assert _unreachable(f"ray://127.0.0.1:{port}") is None
    assert _unreachable(f"127.0.0.1:{port}") == "Connection refused"  # closed now
    assert _unreachable("auto") is None and _unreachable("localhost") is None
