"""The headers every response of the review page carries (a strict CSP, no sniffing, no framing, no referrer, no
caching), and in local mode the refusal of a Host that is not this machine."""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}


class SecurityHeaders:
    """Adds the CSP and friends to every response; in local mode refuses a Host that is not this machine (a
    DNS-rebinding page would otherwise reach the local server under its own name)."""

    def __init__(self, app: ASGIApp, allowed_hosts: set[str] | None) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.allowed_hosts is not None:
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in self.allowed_hosts:
                text = (
                    f"unexpected Host {host!r}: with --auth local the review page answers to this machine's names "
                    "only; for a team, run it with --auth proxy or --auth tokens\n"
                )
                response = Response(text, status_code=400, media_type="text/plain")
                await _with_headers(response)(scope, receive, send)
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + SECURITY_HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _with_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS:
        response.headers[name.decode()] = value.decode()
    return response
