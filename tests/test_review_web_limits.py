"""The review page under a client who never finishes: idle sockets past the connection limit, request heads that
never end, bodies of hundreds of megabytes. `citegate serve` runs as a real process on 127.0.0.1 over a warehouse
built by a real pipeline run; the assertions are on what the client receives, on the server's open sockets and on
its peak memory (VmHWM in /proc)."""

from __future__ import annotations

import dataclasses
import os
import resource
import select
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from markupsafe import escape

from citegate_assets.lib.config import ConfigError, parse_config
from citegate_assets.review_web.server import MAX_BODY_BYTES, RESERVED_FDS

from .helpers import copy_run
from .test_review_web_http import XSS_SPAN, Server, build_warehouse, rows, sign_in

SERVER_OPEN_FILES = 256  # the server's open-file limit in the flood test: a small copy of a 1,024 one
IDLE_SOCKETS = 300  # past what that limit leaves the server, well within the test's own
HUGE = 600 * 1024 * 1024
PEAK_RSS_KB = 150 * 1024


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("review-web-limits")
    build_warehouse(root)
    return root


@pytest.fixture
def own_site(built, tmp_path):
    copy_run(built, tmp_path)
    server = Server(tmp_path)
    yield server, tmp_path
    server.stop()


def open_files(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed the socket (EOF or reset), reading whatever it sent first."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        while sock.recv(65536):
            pass
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return True


def entry_of_xss_request(root: Path) -> tuple[str, str]:
    [(cid, claim)] = rows(
        root / "w.published.duckdb",
        "select citation_id, claim from citation_queue where request_id = 'xss-1' and span = $s",
        {"s": XSS_SPAN},
    )
    return cid, claim


def reviewer_gets_an_entry(server: Server, root: Path) -> None:
    cid, claim = entry_of_xss_request(root)
    session = sign_in(server, "Ann", timeout=60)
    page = session.get(f"{server.base}/entry?" + urlencode({"id": cid}), timeout=60)
    assert page.status_code == 200 and str(escape(claim)) in page.text


def test_idle_sockets_past_the_limit_do_not_lock_out_a_reviewer(built, tmp_path):
    """One client opens more idle sockets than the server's open-file limit leaves it (some silent, some with a
    request head that never ends): the server keeps at most its connection limit open, closing the longest-waiting,
    and a reviewer who sends a whole request still gets the page."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < IDLE_SOCKETS + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    copy_run(built, tmp_path)
    server = Server(tmp_path, preexec_fn=open_files(SERVER_OPEN_FILES))
    idle: list[socket.socket] = []
    try:
        for i in range(IDLE_SOCKETS):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            if i % 2:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and nothing more
            idle.append(sock)
        reviewer_gets_an_entry(server, tmp_path)
        assert server.process.poll() is None
        for sock in idle:
            sock.setblocking(False)
        limit = SERVER_OPEN_FILES - RESERVED_FDS
        assert sum(closed_by_server(sock) for sock in idle) >= IDLE_SOCKETS - limit
        assert len(os.listdir(f"/proc/{server.process.pid}/fd")) < SERVER_OPEN_FILES
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_a_request_head_that_never_finishes_is_closed(own_site):
    """Slowloris: a silent socket, a head trickled a byte at a time, and a kept-alive connection whose second head
    trickles: the server closes each (408 for a started head) within its head timeout (10 s by default)."""
    server, _ = own_site
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    trickle = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    trickle.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    kept = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    kept.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = b""
    while b"</html>" not in first:
        first += kept.recv(65536)
    assert first.startswith(b"HTTP/1.1 200") and b"connection: close" not in first.lower()
    kept.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    received = {"silent": b"", "trickle": b"", "kept": b""}
    sockets = {"silent": silent, "trickle": trickle, "kept": kept}
    open_ = set(sockets)
    deadline = time.monotonic() + 90
    try:
        while open_ and time.monotonic() < deadline:
            for name in list(open_):
                sock = sockets[name]
                try:
                    if name != "silent":
                        sock.sendall(b"a")  # one more byte of the head: it never ends
                    readable, _, _ = select.select([sock], [], [], 0)
                    if readable:
                        data = sock.recv(65536)
                        received[name] += data
                        if not data:
                            open_.discard(name)
                except OSError:
                    open_.discard(name)
            time.sleep(0.5)
        assert not open_, f"still open after 90 s: {sorted(open_)}"
        assert received["silent"] == b""
        assert received["trickle"].startswith(b"HTTP/1.1 408") and received["kept"].startswith(b"HTTP/1.1 408")
    finally:
        for sock in sockets.values():
            sock.close()


def post_huge(port: int, head: bytes, chunk: bytes, count: int) -> bytes:
    """Sends the head, then `chunk` `count` times from a thread (until the server stops it); what came back."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(head)

    def pump() -> None:
        try:
            for _ in range(count):
                sock.sendall(chunk)
        except OSError:
            pass  # the server closed the connection: that is the point

    sender = threading.Thread(target=pump)
    sender.start()
    answer = b""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    except OSError:
        pass
    sender.join(timeout=120)
    sock.close()
    return answer


def test_a_huge_body_or_head_is_refused_before_it_is_read(own_site):
    """600 MB declared by Content-Length, 600 MB chunked and a header line that never ends, all unauthenticated:
    413, 413 and 431, and the server's peak memory stays bounded (it never holds them)."""
    server, root = own_site
    pid = server.process.pid
    mb = b"a" * (1 << 20)
    declared = post_huge(
        server.port,
        b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        + f"Content-Length: {HUGE}\r\n\r\n".encode(),
        mb,
        HUGE >> 20,
    )
    assert peak_rss_kb(pid) < PEAK_RSS_KB, f"peak RSS {peak_rss_kb(pid)} kB after a declared 600 MB body"
    assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
    assert f"larger than {MAX_BODY_BYTES} bytes".encode() in declared
    chunked = post_huge(
        server.port,
        b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
        b"%x\r\n" % len(mb) + mb + b"\r\n",
        HUGE >> 20,
    )
    assert peak_rss_kb(pid) < PEAK_RSS_KB, f"peak RSS {peak_rss_kb(pid)} kB after a chunked 600 MB body"
    assert chunked.startswith(b"HTTP/1.1 413"), chunked[:200]
    head = post_huge(server.port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: ", mb, 64)
    assert head.startswith(b"HTTP/1.1 431"), head[:200]
    assert peak_rss_kb(pid) < PEAK_RSS_KB, f"peak RSS {peak_rss_kb(pid)} kB after a 64 MB header line"
    reviewer_gets_an_entry(server, root)  # and the page still serves


def test_the_review_page_limits_come_from_the_config(built, tmp_path):
    """[review_page]: a smaller connection limit, a short head timeout and a short body timeout take effect."""
    copy_run(built, tmp_path)
    config = tmp_path / "citegate.toml"
    config.write_text("[review_page]\nmax_connections = 20\nhead_timeout_s = 1\nbody_timeout_s = 1\n")
    server = Server(tmp_path, config=str(config))
    idle: list[socket.socket] = []
    try:
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(50)]
        slow = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        slow.sendall(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nreviewer=")
        answer = b""
        while chunk := slow.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b"body not received within 1 s" in answer
        slow.close()
        for sock in idle:
            sock.setblocking(False)
        assert sum(closed_by_server(sock) for sock in idle) >= 30  # at most 20 kept, then the head timeout
        reviewer_gets_an_entry(server, tmp_path)
    finally:
        for sock in idle:
            sock.close()
        server.stop()


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("session_idle_minutes", 0, r"review_page\.session_idle_minutes = 0: expected a number > 0"),
        ("session_max_hours", "12h", r"review_page\.session_max_hours = '12h': expected a number > 0"),
        ("max_connections", 0, r"review_page\.max_connections = 0: expected an integer >= 1"),
        ("head_timeout_s", -1, r"review_page\.head_timeout_s = -1: expected a number > 0"),
        ("keep_alive_s", 1.5, r"review_page\.keep_alive_s = 1\.5: expected an integer >= 1"),
        ("body_timeout_s", True, r"review_page\.body_timeout_s = True: expected a number > 0"),
        ("max_body_bytes", 1, r"unknown key 'review_page\.max_body_bytes'"),
    ],
)
def test_review_page_settings_are_checked_and_named(key, value, message):
    with pytest.raises(ConfigError, match=r"^c\.toml: " + message):
        parse_config({"review_page": {key: value}}, "c.toml")
    assert dataclasses.asdict(parse_config({}, None).review_page) == {
        "session_idle_minutes": 120.0,
        "session_max_hours": 12.0,
        "max_connections": 256,
        "head_timeout_s": 10.0,
        "keep_alive_s": 5,
        "body_timeout_s": 30.0,
    }
