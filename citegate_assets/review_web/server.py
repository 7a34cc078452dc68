"""The review page's HTTP server: uvicorn (its httptools protocol) with limits that hold against a client who opens
sockets and never finishes a request.

uvicorn alone times out nothing before a request's head is complete, accepts connections until the process runs out
of file descriptors, and a Starlette handler reads a body whole. Here:

- at most ``max_connections`` connections are open, and never more than the process's open-file limit leaves after
  RESERVED_FDS. A new connection past the limit closes the one that has waited longest for a request head (a fresh
  connection or an idle kept-alive one): idle sockets cannot lock out a client that sends its request at once.
  When every open connection is busy in a request, the new one gets 503 and is closed;
- a request head must be complete within ``head_timeout_s`` of the moment the connection began to wait for it (a
  trickle of bytes does not extend it; 408) and within MAX_HEAD_BYTES (431); the connection is then closed;
- an idle kept-alive connection is closed after ``keep_alive_s`` (uvicorn's own timer);
- a request body (BodyLimit) is refused with 413 from its Content-Length before a byte of it is read, a chunked
  one as soon as it passes ``max_body_bytes`` (never held whole), and one that does not arrive within
  ``body_timeout_s`` with 408; each of these closes the connection.
"""

from __future__ import annotations

import asyncio
import http
import resource
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_BODY_BYTES = 64 * 1024  # the page's largest form (a decision with its note) is far smaller
MAX_HEAD_BYTES = 64 * 1024
RESERVED_FDS = 160  # the process's own files: Python, DuckDB's read-only connection per request (up to 40 at once)
MIN_CONNECTIONS = 16


@dataclass(frozen=True)
class ServerLimits:
    max_connections: int = 256
    head_timeout_s: float = 10.0
    keep_alive_s: int = 5
    body_timeout_s: float = 30.0
    max_body_bytes: int = MAX_BODY_BYTES


def connection_limit(requested: int) -> int:
    """`requested`, lowered to what the open-file limit leaves after RESERVED_FDS; an error when that is too little."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    room = soft - RESERVED_FDS
    if room < MIN_CONNECTIONS:
        raise ValueError(
            f"the open-file limit ({soft}) leaves room for {max(room, 0)} connections after the "
            f"{RESERVED_FDS} the server keeps for itself; raise it (ulimit -n) to at least "
            f"{RESERVED_FDS + MIN_CONNECTIONS}"
        )
    return min(requested, room)


def raw_response(status: int, text: str) -> bytes:
    """A whole plain-text response that closes the connection, for the protocol's refusals (no app involved)."""
    body = text.encode()
    phrase = http.HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {len(body)}\r\n"
        "x-content-type-options: nosniff\r\ncache-control: no-store\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class ConnectionGuard:
    """One server's open connections, and those among them waiting for a request head (the longest wait first)."""

    def __init__(self, limits: ServerLimits, max_connections: int) -> None:
        self.limits = limits
        self.max_connections = max_connections
        self.open: set[GuardedHttpToolsProtocol] = set()
        self.waiting: OrderedDict[GuardedHttpToolsProtocol, None] = OrderedDict()

    def admit(self, connection: GuardedHttpToolsProtocol) -> bool:
        """Whether a new connection may stay: yes below the limit, or when one waiting for a head gives way."""
        if len(self.open) >= self.max_connections:
            if not self.waiting:
                return False
            oldest, _ = self.waiting.popitem(last=False)
            self.open.discard(oldest)
            oldest.close_quietly()
        self.open.add(connection)
        return True


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, bounded by its class's ConnectionGuard (see the module's docstring)."""

    guard: ClassVar[ConnectionGuard]
    head_timer: asyncio.TimerHandle | None = None
    head_bytes: int = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        if not self.guard.admit(self):
            self.refuse(503, "too many connections: try again shortly\n")
            return
        self.await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.open.discard(self)
        self.head_done()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        waiting = self in self.guard.waiting
        super().data_received(data)
        if waiting and self in self.guard.waiting and not self.transport.is_closing():
            self.head_bytes += len(data)  # the head is still not complete after this chunk
            if self.head_bytes > MAX_HEAD_BYTES:
                self.refuse(431, f"request head larger than {MAX_HEAD_BYTES} bytes\n")

    def on_headers_complete(self) -> None:
        self.head_done()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None and not self.transport.is_closing():
            self.await_head()  # idle and kept alive: the next request's head is awaited (uvicorn armed its timer)

    def await_head(self) -> None:
        self.head_done()
        self.head_bytes = 0
        self.guard.waiting[self] = None
        self.head_timer = self.loop.call_later(self.guard.limits.head_timeout_s, self.head_timed_out)

    def head_done(self) -> None:
        self.guard.waiting.pop(self, None)
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def head_timed_out(self) -> None:
        self.head_timer = None
        self.guard.waiting.pop(self, None)
        if self.head_bytes:
            self.refuse(408, f"request head not complete within {self.guard.limits.head_timeout_s:g} s\n")
        else:
            self.close_quietly()

    def refuse(self, status: int, text: str) -> None:
        self.head_done()
        if not self.transport.is_closing():
            self.transport.write(raw_response(status, text))
            self.transport.close()

    def close_quietly(self) -> None:
        self.head_done()
        if not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(limits: ServerLimits, max_connections: int) -> type[GuardedHttpToolsProtocol]:
    """A protocol class of its own for one server: the guard is shared by that server's connections only."""
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"guard": ConnectionGuard(limits, max_connections)},
    )


def server_config(app: ASGIApp, host: str, port: int, limits: ServerLimits, **extra: Any) -> uvicorn.Config:
    """uvicorn's Config for the review page: the guarded protocol, no WebSocket, no access log (a URL may carry the
    local mode's access token)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(limits, connection_limit(limits.max_connections)),
        ws="none",
        timeout_keep_alive=limits.keep_alive_s,
        log_level="warning",
        access_log=False,
        server_header=False,
        **extra,
    )


class BodyLimit:
    """Reads a request's body before the app sees it, bounded in size and time; the app then reads it from memory.

    A Content-Length over the limit is refused before anything is read; a chunked body as soon as it passes the
    limit; a body that does not arrive within the timeout gets 408. Each refusal closes the connection (the rest of
    the body is never read)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES, timeout_s: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = [value for name, value in scope["headers"] if name == b"content-length"]
        if declared:
            if len(declared) > 1 or not declared[0].isdigit():
                await _refuse(send, 400, "Content-Length must be one whole number\n")
                return
            if int(declared[0]) > self.max_bytes:
                await _refuse(send, 413, f"request body larger than {self.max_bytes} bytes: refused unread\n")
                return
        chunks: list[bytes] = []
        size = 0
        try:
            with anyio.fail_after(self.timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return  # the client left: nobody to answer
                    body = message.get("body", b"")
                    size += len(body)
                    if size > self.max_bytes:
                        await _refuse(send, 413, f"request body larger than {self.max_bytes} bytes\n")
                        return
                    chunks.append(body)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _refuse(send, 408, f"request body not received within {self.timeout_s:g} s\n")
            return
        whole: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal whole
            if whole is not None:
                message, whole = whole, None
                return message
            return await receive()  # after the body: only a disconnect can come

        await self.app(scope, replay, send)


async def _refuse(send: Send, status: int, text: str) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
