"""Safe by default: read-only methods, an optional token, and strict headers on every answer."""

from __future__ import annotations

import hmac
import ipaddress
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["COOKIE", "HEADERS", "SafetyMiddleware", "is_loopback"]

COOKIE = "seqline_token"
# Everything the page loads comes from this server: no CDN, no inline script or style
# (the icon is `data:,` so the browser asks for no /favicon.ico).
CSP = ("default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
READ_ONLY = ("GET", "HEAD")


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the dashboard on this machine (127.0.0.0/8, ::1, localhost).

    Example: is_loopback("0.0.0.0") -> False.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class SafetyMiddleware:
    """405 for any method but GET and HEAD; with a token, 401 without it; headers always.

    The token is accepted as `Authorization: Bearer TOKEN` (Prometheus, curl) or as the
    `seqline_token` cookie, which `?token=TOKEN` sets (HttpOnly, SameSite=Strict) before
    redirecting to the same address without it, so the token leaves the address bar.
    """

    def __init__(self, app: ASGIApp, token: str | None = None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] not in READ_ONLY:
            await _plain(send, 405, b"read-only: only GET and HEAD are allowed\n",
                         [(b"allow", b"GET, HEAD")])
            return
        token = self.token
        if token is not None:
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
            given = dict(query).get("token")
            if given is not None and _matches(given, token):
                rest = urlencode([(k, v) for k, v in query if k != "token"])
                cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
                # The raw path, with one leading slash: "//evil.example" must not become a
                # redirect to another site.
                path = scope.get("raw_path") or scope["path"].encode()
                where = b"/" + path.lstrip(b"/") + (f"?{rest}".encode() if rest else b"")
                await _plain(send, 303, b"", [(b"location", where),
                                              (b"set-cookie", cookie.encode())])
                return
            if not _matches(_presented(scope) or "", token):
                await _plain(send, 401, b"a token is needed: open the address with "
                                        b"?token=TOKEN, or send Authorization: Bearer TOKEN\n",
                             [(b"www-authenticate", b"Bearer")])
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


def _matches(given: str, token: str) -> bool:
    """In constant time, so the answer's timing tells nothing about the token."""
    return hmac.compare_digest(given.encode(), token.encode())


def _presented(scope: Scope) -> str | None:
    """The token the request carries: a Bearer header first, else the cookie."""
    headers = dict(scope["headers"])
    auth = headers.get(b"authorization", b"").decode("latin-1")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    cookie = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
    return cookie[COOKIE].value if COOKIE in cookie else None


async def _plain(send: Send, status: int, body: bytes,
                 headers: list[tuple[bytes, bytes]]) -> None:
    start: dict[str, Any] = {"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()), *headers, *HEADERS]}
    await send(start)
    await send({"type": "http.response.body", "body": body})
