"""Who may use the review page, and for how long: local mode serves only whoever has the access token `citegate
serve` printed; sessions live on the server, end when idle or old, and sign-out ends them. `citegate serve` runs
over real HTTP on 127.0.0.1 (a subprocess; for expiry, the same app and server in a thread with a clock the test
moves), over a warehouse built by a real pipeline run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests
import uvicorn
from markupsafe import escape

from citegate_assets.lib.core import paths as where
from citegate_assets.lib.review.reviews import read_reviews
from citegate_assets.review_web.app import ServeOptions, create_app
from citegate_assets.review_web.server import ServerLimits, server_config

from .helpers import copy_run
from .test_review_web_http import XSS_SPAN, Server, build_warehouse, csrf_of, free_port, rows, sign_in

COOKIE = "citegate_review_session"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("review-web-access")
    build_warehouse(root)
    return root


@pytest.fixture
def local_site(built, tmp_path):
    copy_run(built, tmp_path)
    server = Server(tmp_path)
    yield server, tmp_path
    server.stop()


def xss_entry(root: Path) -> tuple[str, str, str]:
    """The citation id, claim and a prompt excerpt of the entry whose request carries the XSS payloads."""
    [(cid, claim)] = rows(
        root / "w.published.duckdb",
        "select citation_id, claim from citation_queue where request_id = 'xss-1' and span = $s",
        {"s": XSS_SPAN},
    )
    return cid, claim, "window.__xss"


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under the reviews log folder and its bytes (empty when the folder does not exist)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def data_paths(cid: str, root: Path) -> list[str]:
    [(metric, surface, week)] = rows(
        root / "w.published.duckdb",
        "select metric, surface, strftime(week_start, '%Y-%m-%d') from weekly_surface_metrics order by all limit 1",
    )
    return [
        "/",
        "/?status=open",
        "/entry?" + urlencode({"id": cid}),
        "/metrics",
        "/chart.png",
        "/trace?" + urlencode({"metric": metric, "surface": surface, "week": week}),
    ]


# ------------------------------------------------------------------------------------------- local mode: the token


def test_local_mode_serves_only_whoever_has_the_printed_access_token(local_site):
    """Another user of the machine reaches 127.0.0.1 too: without the token every page that reads data is 401 with
    no prompt text in it, every POST is 403, and signing in with a name alone (what the page once allowed) fails."""
    server, root = local_site
    cid, claim, prompt_text = xss_entry(root)
    before = folder_bytes(server.reviews)

    stranger = requests.Session()
    for path in data_paths(cid, root):
        page = stranger.get(server.base + path, allow_redirects=False)
        assert page.status_code == 401, path
        assert prompt_text not in page.text and str(escape(claim)) not in page.text and claim not in page.text, path
    # the sign-in page asks for the token; a name alone, or a wrong token, is refused and grants nothing
    login = stranger.get(f"{server.base}/login")
    assert login.status_code == 200 and 'name="token"' in login.text
    for fields in ({"reviewer": "Mallory"}, {"reviewer": "Mallory", "token": "x" * 43}):
        refused = stranger.post(
            f"{server.base}/login", data={"csrf": csrf_of(login.text), "next": "/", **fields}, allow_redirects=False
        )
        assert refused.status_code == 403 and prompt_text not in refused.text
        assert stranger.get(f"{server.base}/", allow_redirects=False).status_code == 401
    wrong = stranger.get(f"{server.base}/entry", params={"id": cid, "token": "y" * 43}, allow_redirects=False)
    assert wrong.status_code == 403 and prompt_text not in wrong.text and "y" * 43 not in wrong.text
    decided = stranger.post(
        f"{server.base}/decide",
        data={"csrf": csrf_of(login.text), "citation_id": cid, "outcome": "accept"},
        allow_redirects=False,
    )
    assert decided.status_code == 403
    assert folder_bytes(server.reviews) == before  # nothing recorded

    # the printed URL admits, and leaves the address bar at once; then the name is asked
    assert server.token and len(server.token) >= 32
    owner = requests.Session()
    admitted = owner.get(f"{server.base}/entry", params={"id": cid, "token": server.token}, allow_redirects=False)
    assert admitted.status_code == 303 and admitted.headers["location"] == "/entry?" + urlencode({"id": cid})
    assert server.token not in admitted.headers["location"]
    asked = owner.get(f"{server.base}{admitted.headers['location']}", allow_redirects=False)
    assert asked.status_code == 303 and asked.headers["location"].startswith("/login")
    signed = sign_in(server, "Owner")
    entry = signed.get(f"{server.base}/entry", params={"id": cid})
    assert entry.status_code == 200 and str(escape(claim)) in entry.text

    # or the token pasted into the sign-in page, with the name
    pasted = requests.Session()
    form = pasted.get(f"{server.base}/login").text
    done = pasted.post(
        f"{server.base}/login",
        data={"csrf": csrf_of(form), "token": server.token, "reviewer": "Paster", "next": "/"},
    )
    assert done.status_code == 200 and "reviewing as <strong>Paster</strong>" in done.text

    # the token is shown once, in the line printed at start, and nowhere else: no access log, no error line
    assert server.log_path.read_text().count(server.token) == 1


def test_a_given_access_token_is_checked_and_never_printed(built, tmp_path):
    copy_run(built, tmp_path)
    given = "G" * 30
    server = Server(tmp_path, env={"CITEGATE_REVIEW_TOKEN": given})
    try:
        assert server.token is None and given not in server.log_path.read_text()
        assert requests.get(f"{server.base}/", allow_redirects=False).status_code == 401
        server.token = given
        assert sign_in(server, "Ann").get(f"{server.base}/").status_code == 200
    finally:
        server.stop()
    refused = subprocess.run(  # a too-short token: refused at start, and not echoed
        [sys.executable, "-m", "citegate_assets.cli", "serve", "--config", "<built-in>"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "CITEGATE_REVIEW_TOKEN": "short-token"},
        timeout=60,
    )
    assert refused.returncode == 2 and "CITEGATE_REVIEW_TOKEN: the access token is too short" in refused.stderr
    assert "short-token" not in refused.stderr + refused.stdout


# ------------------------------------------------------------------------------------------- sessions: sign-out


@pytest.mark.parametrize("mode", ["local", "tokens"])
def test_a_cookie_copied_before_sign_out_is_refused_after_it(built, tmp_path, mode):
    copy_run(built, tmp_path)
    args: list[str] = []
    if mode == "tokens":
        tokens = tmp_path / "tokens"
        tokens.write_text("Ann tok-ann-aaaaaaaaaaaaaaaaaaaaaaaa\n")
        tokens.chmod(0o600)
        args = ["--auth", "tokens", "--tokens", str(tokens)]
    server = Server(tmp_path, *args)
    try:
        cid, claim, prompt_text = xss_entry(tmp_path)
        if mode == "tokens":
            ann = requests.Session()
            form = ann.get(f"{server.base}/login").text
            ann.post(
                f"{server.base}/login",
                data={"csrf": csrf_of(form), "token": "tok-ann-aaaaaaaaaaaaaaaaaaaaaaaa", "next": "/"},
            )
        else:
            ann = sign_in(server, "Ann")
        entry = ann.get(f"{server.base}/entry", params={"id": cid})
        assert entry.status_code == 200 and str(escape(claim)) in entry.text
        copied, token = ann.cookies[COOKIE], csrf_of(entry.text)
        thief = requests.Session()
        thief.cookies.set(COOKIE, copied)
        assert thief.get(f"{server.base}/entry", params={"id": cid}).status_code == 200  # the copy works, for now

        out = ann.post(f"{server.base}/logout", data={"csrf": token}, allow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/login"
        before = folder_bytes(server.reviews)
        page = thief.get(f"{server.base}/entry", params={"id": cid}, allow_redirects=False)
        assert page.status_code == (401 if mode == "local" else 303)
        assert str(escape(claim)) not in page.text and prompt_text not in page.text
        decided = thief.post(
            f"{server.base}/decide",
            data={"csrf": token, "citation_id": cid, "outcome": "accept"},
            allow_redirects=False,
        )
        assert decided.status_code == 403
        assert folder_bytes(server.reviews) == before
    finally:
        server.stop()


# ------------------------------------------------------------------------------------------- sessions: expiry


class Clock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ThreadServer:
    """The app under the same uvicorn server `citegate serve` runs (server_config), in a thread, on 127.0.0.1."""

    def __init__(self, app, token: str | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = token  # what sign_in opens the page with, as with Server
        self.server = uvicorn.Server(server_config(app, "127.0.0.1", self.port, ServerLimits()))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


IDLE_S = 600.0
MAX_S = 3_600.0
ACCESS = "access-token-of-this-test-aaaaaaaa"


def test_sessions_end_when_idle_and_when_old(built, tmp_path):
    copy_run(built, tmp_path)
    clock = Clock()
    settings = where.resolve(
        warehouse=tmp_path / "w.duckdb", reviews=tmp_path / "reviews", config=where.BUILTIN_CONFIG, env={}
    )
    options = ServeOptions(access_token=ACCESS, session_idle_s=IDLE_S, session_max_s=MAX_S)
    server = ThreadServer(create_app(settings, options, clock=clock), token=ACCESS)
    try:
        cid, claim, prompt_text = xss_entry(tmp_path)
        reviews = tmp_path / "reviews"

        def refused_everywhere(session: requests.Session, token: str) -> None:
            before = folder_bytes(reviews)
            page = session.get(f"{server.base}/entry", params={"id": cid}, allow_redirects=False)
            assert page.status_code == 401 and prompt_text not in page.text and str(escape(claim)) not in page.text
            decided = session.post(
                f"{server.base}/decide", data={"csrf": token, "citation_id": cid, "outcome": "accept"}
            )
            assert decided.status_code == 403
            assert folder_bytes(reviews) == before

        # idle: each use restarts the idle time; a gap longer than it ends the session
        ann = sign_in(server, "Ann")
        token = csrf_of(ann.get(f"{server.base}/").text)
        for _ in range(3):
            clock.advance(IDLE_S - 1)
            assert ann.get(f"{server.base}/entry", params={"id": cid}).status_code == 200
        clock.advance(IDLE_S + 1)
        refused_everywhere(ann, token)

        # absolute: used every few minutes, the session still ends MAX_S after sign-in
        bob = sign_in(server, "Bob")
        token = csrf_of(bob.get(f"{server.base}/").text)
        used = 0.0
        while used + IDLE_S / 2 <= MAX_S:
            clock.advance(IDLE_S / 2)
            used += IDLE_S / 2
            assert bob.get(f"{server.base}/", allow_redirects=False).status_code == 200, used
        clock.advance(IDLE_S / 2)
        refused_everywhere(bob, token)

        # a fresh sign-in works, and its decision is recorded under its name: the refusals above were the expiry
        carol = sign_in(server, "Carol")
        token = csrf_of(carol.get(f"{server.base}/entry", params={"id": cid}).text)
        ok = carol.post(f"{server.base}/decide", data={"csrf": token, "citation_id": cid, "outcome": "accept"})
        assert ok.status_code == 200
        assert [(line.review.citation_id, line.review.reviewer) for line in read_reviews(reviews) if line.review] == [
            (cid, "Carol")
        ]
    finally:
        server.stop()
