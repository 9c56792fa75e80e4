"""`seqline dashboard` binds its own socket (cli/dashboard._listen): the connections it accepts
must have Nagle's algorithm off, or every answer after the first on a kept-alive connection
waits for the client's delayed ACK (40-50 ms on Linux; benchmarks/DASHBOARD_SCALE.md)."""

from __future__ import annotations

import asyncio
import socket
from concurrent.futures import ThreadPoolExecutor

from seqline.orchestration.cli.dashboard import _listen


def test_dashboard_socket_accepts_connections_with_nagle_off():
    listening = _listen("127.0.0.1", 0)

    async def accepted_nodelay() -> int:
        found: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            found.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accept, sock=listening)  # as uvicorn serves it
        async with server:
            _, writer = await asyncio.open_connection(*listening.getsockname())
            nodelay = await asyncio.wait_for(found, timeout=10)
            writer.close()
        return nodelay

    # On a thread of its own: a test before it on this worker (Playwright's sync API) may
    # leave an event loop running on this one, where asyncio.run refuses to start.
    with ThreadPoolExecutor(1) as thread:
        assert thread.submit(asyncio.run, accepted_nodelay()).result(timeout=60) != 0
