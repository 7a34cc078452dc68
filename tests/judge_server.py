"""A real, scriptable OpenAI chat-completions server for tests (stdlib only).

    with ScriptedJudgeServer(lambda req, i: Reply("no")) as server:
        judge = OpenAIJudge(JudgeSettings(base_url=server.base_url, model="m"))

A gateway that echoes the key: a reply's text (the content of a 200, the message of an error, a raw body) may hold
the placeholders of `echo_key`, each replaced by the key of the request's `Authorization: Bearer` header, as
written (KEY), JSON-escaped with every other character as \\uXXXX and '/' as '\\/' (KEY_JSON), or URL-escaped
(KEY_URL).

Every complete request body that parses as a JSON object is recorded (`requests`, with
`arrival_times` from time.monotonic() and `request_headers`); a body cut short (its client was killed
mid-send) or unparseable gets a 400 and is only counted (`incomplete_requests`): it is not a call. The
highest number of requests in flight at once is tracked (`max_in_flight`), and `stop()` closes the
listening socket so that later requests fail with connection refused. The server has no loop of its own
beyond `serve_forever` in a daemon thread; handler threads are daemons too, and scripted delays are cut
short by `stop()`, so nothing outlives the test.
"""

from __future__ import annotations

import http
import io
import json
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY, KEY_JSON, KEY_URL = "<key>", "<key:json>", "<key:url>"


def echo_key(text: str, authorization: str | None) -> str:
    """text with the placeholders replaced by the bearer token of `authorization` (see the module docstring)."""
    token = (authorization or "").removeprefix("Bearer ")
    escaped = "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(token)).replace("/", "\\/")
    return text.replace(KEY_JSON, escaped).replace(KEY_URL, urllib.parse.quote(token, safe="")).replace(KEY, token)


@dataclass
class Reply:
    text: str | None = "yes"  # the assistant message content
    status: int = 200
    headers: dict = field(default_factory=dict)  # e.g. {"Retry-After": "1"}
    delay_s: float = 0.0  # sleep before answering (timeouts, concurrency)
    body: bytes | None = None  # raw body override (malformed responses)
    reset: bool = False  # close the connection without answering (connection reset)


Answer = Callable[[dict, int], Reply]


def _default_answer(request_json: dict, call_index: int) -> Reply:
    return Reply()


def _prompt_words(request_json: dict) -> int:
    words = 0
    for message in request_json.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            words += len(content.split())
    return words


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the stdlib default of 5 drops SYNs under a burst of connections


class ScriptedJudgeServer:
    def __init__(self, answer: Answer | None = None):
        self.answer: Answer = answer or _default_answer
        self.requests: list[dict] = []  # complete, parseable request bodies only
        self.incomplete_requests = 0  # bodies cut short (a killed client) or not a JSON object: not recorded
        self.arrival_times: list[float] = []  # time.monotonic() of each request, same order as `requests`
        self.request_headers: list[dict] = []  # each request's headers (lower-cased names), same order
        self.max_in_flight = 0
        self.in_flight = 0
        self.base_url = ""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ScriptedJudgeServer:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
        port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listening socket: requests not yet accepted fail (connection refused / reset).
        Requests already being handled still get their answer, without the rest of their delay.
        Safe to call more than once and from any thread, including a handler thread."""
        httpd = self._httpd
        if httpd is None or self._stopping.is_set():
            return
        self._stopping.set()
        httpd.shutdown()  # waits for serve_forever to return (it runs in its own thread, never a handler's)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def __enter__(self) -> ScriptedJudgeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- request handling ------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: stop() really stops everything

            def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
                pass

            def do_POST(self):
                server._handle(self)

            def do_GET(self):
                server._send(self, 404, {"Content-Type": "application/json"}, _error_body(404, "not found"))

        return Handler

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        try:
            raw = handler.rfile.read(length) if length else b""
        except OSError:  # the client went away mid-body
            raw = b""
        try:
            request_json = json.loads(raw.decode("utf-8")) if len(raw) == length else None
        except ValueError:
            request_json = None
        if not isinstance(request_json, dict):
            # a cut body (the client was killed while sending) or not a JSON object: not a call. It is
            # counted apart and never appears in `requests`, so a test counts only complete requests.
            with self._lock:
                self.incomplete_requests += 1
            self._send(
                handler,
                400,
                {"Content-Type": "application/json"},
                _error_body(400, "incomplete or malformed request body"),
            )
            return
        with self._lock:
            index = len(self.requests)
            self.requests.append(request_json)
            self.arrival_times.append(time.monotonic())
            self.request_headers.append({k.lower(): v for k, v in handler.headers.items()})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        answered = False

        def answering() -> None:
            # a call is in flight until its answer starts: its client may send the next request as soon as it has
            # the answer, before this thread is done writing, and that one must not count twice
            nonlocal answered
            if not answered:
                answered = True
                with self._lock:
                    self.in_flight -= 1

        try:
            if handler.path.rstrip("/") != "/v1/chat/completions":
                answering()
                self._send(handler, 404, {"Content-Type": "application/json"}, _error_body(404, "no such route"))
                return
            reply = self.answer(request_json, index)
            authorization = handler.headers.get("Authorization")
            if reply.text is not None:
                reply = replace(reply, text=echo_key(reply.text, authorization))
            if reply.body is not None:
                reply = replace(reply, body=echo_key(reply.body.decode(), authorization).encode())
            if reply.delay_s > 0:
                self._stopping.wait(reply.delay_s)
            answering()
            if reply.reset:
                _reset(handler)
                return
            if reply.body is not None:
                body = reply.body
            elif reply.status == 200:
                body = _completion_body(request_json, reply.text, index)
            else:
                body = _error_body(reply.status, reply.text)
            headers = {"Content-Type": "application/json", **reply.headers}
            self._send(handler, reply.status, headers, body)
        finally:
            answering()

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, headers: dict, body: bytes) -> None:
        try:
            handler.send_response(status)
            for name, value in headers.items():
                handler.send_header(name, str(value))
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            handler.wfile.flush()
        except OSError:  # the client gave up (timeout) and closed its end
            pass


def _completion_body(request_json: dict, text: str | None, index: int) -> bytes:
    prompt_tokens = _prompt_words(request_json)
    return json.dumps(
        {
            "id": f"chatcmpl-scripted-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request_json.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
        }
    ).encode()


def _error_body(status: int, message: str | None) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    if not message or message == "yes":  # Reply's default text is meaningless on an error status
        message = f"scripted {status} {phrase}"
    kind = "rate_limit_error" if status == 429 else ("server_error" if status >= 500 else "invalid_request_error")
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()


def _reset(handler: BaseHTTPRequestHandler) -> None:
    """Close with SO_LINGER 0: the kernel sends RST instead of FIN, a real connection reset. The
    handler's file objects go first, or socket.close() would wait for them to release the fd."""
    try:
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        handler.rfile.close()
        handler.wfile.close()
        handler.connection.close()
    except OSError:
        pass
    handler.wfile = io.BytesIO()  # http.server flushes wfile after do_POST returns
