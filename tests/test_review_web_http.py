"""The review web page over real HTTP: `citegate serve` started on 127.0.0.1 (a free port) over a warehouse built by a
real pipeline run, driven with `requests`; assertions on the pages, on the reviews log and on what the warehouse
holds."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import pytest
import requests
from markupsafe import escape  # exactly what Jinja2's autoescape writes

from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.review.reviews import read_reviews
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan

from .helpers import copy_run, run_once, scenario_record, write_jsonl

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 3))
XSS_CLAIM = '<script>window.__xss = "claim"</script>Prices <b>rise</b>'
XSS_SPAN = "<img src=x onerror=\"window.__xss = 'span'\">"
XSS_PROMPT = "<script>window.__xss = 'prompt'</script><svg onload=\"window.__xss = 'svg'\">"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


# ---------------------------------------------------------------------------------------------------- shared helpers


def build_warehouse(root: Path) -> None:
    """Two generated days, plus one request whose claims, spans and prompt carry XSS payloads; one real run."""
    generate_logs(root / "landing", days=2, requests_per_day=60, seed=5, truth_path=root / "truth.jsonl")
    record = scenario_record("plain-list", "text", request_id="xss-1")
    record["prompt"] = XSS_PROMPT + "\n" + record["prompt"]
    for citation in record["citations"]:
        citation["claim"] = XSS_CLAIM
    record["citations"][1]["span"] = XSS_SPAN  # the fabricated-id citation: queued whatever its span
    write_jsonl(root / "landing" / "xss.jsonl", [record])
    run_once(root, PLAN)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`citegate serve` in a subprocess on 127.0.0.1, stopped by stop(). In local mode `token` is the access token
    from the URL it printed, as the person who started it reads it."""

    def __init__(
        self,
        root: Path,
        *args: str,
        env: dict[str, str] | None = None,
        config: str = "<built-in>",
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.reviews = root / "reviews"
        # a port free when chosen can be taken by another test's server before ours binds it: try another
        for _attempt in range(5):
            self.port = free_port()
            self.base = f"http://127.0.0.1:{self.port}"
            command = [sys.executable, "-m", "citegate_assets.cli", "serve", "--warehouse", str(root / "w.duckdb")]
            command += ["--reviews", str(self.reviews), "--config", config, "--port", str(self.port), *args]
            self.log_path = root / f"serve-{self.port}.log"
            self.log = open(self.log_path, "w")
            self.process = subprocess.Popen(
                command,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=root,
                preexec_fn=preexec_fn,
            )
            if self._listening():
                return
        raise RuntimeError(f"citegate serve found no free port: {self.log_path.read_text()}")

    def _listening(self) -> bool:
        """True once this server, not another process on the same port, answers; False when its port was taken."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                out = self.log_path.read_text()
                if "address already in use" in out.lower():
                    self.log.close()
                    return False
                raise RuntimeError(f"citegate serve exited: {out}")
            out = self.log_path.read_text()
            if "review page: " not in out:  # printed before it binds: until then the port is not ours
                time.sleep(0.1)
                continue
            found = re.search(r"review page: \S+\?token=([A-Za-z0-9_-]+)", out)
            self.token = found.group(1) if found else None
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            if self.token is None or self._admits_own_token():
                return True
            self.stop()  # another server answers on this port
            return False
        self.stop()
        raise RuntimeError("citegate serve did not listen within 30 s")

    def _admits_own_token(self) -> bool:
        """Our access token is admitted (a redirect) by the server on the port; another server refuses it (403)."""
        answer = requests.get(f"{self.base}/login", params={"token": self.token}, allow_redirects=False, timeout=30)
        return answer.status_code == 303

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token in the page"
    return found.group(1)


def sign_in(server: Server, name: str = "Ann Reviewer", timeout: float = 60) -> requests.Session:
    """Signed in as `name`: in local mode through the printed URL's access token first, as a browser would."""
    session = requests.Session()
    token = {"token": server.token} if server.token else None
    page = session.get(f"{server.base}/login", params=token, timeout=timeout)
    assert page.status_code == 200 and page.url == f"{server.base}/login"  # the token left the URL at once
    form = {"csrf": csrf_of(page.text), "reviewer": name, "next": "/"}
    done = session.post(f"{server.base}/login", data=form, timeout=timeout)
    assert done.status_code == 200 and done.url == f"{server.base}/"
    return session


def rows(warehouse: Path, sql: str, params: dict | None = None) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return con.execute(sql, params or {}).fetchall()


def shown_ids(html: str) -> list[str]:
    from html import unescape

    return [unescape(v) for v in re.findall(r'data-citation="([^"]*)"', html)]


def link(html: str, element_id: str) -> str | None:
    from html import unescape

    found = re.search(rf'<a href="([^"]+)"[^>]*id="{element_id}"', html)
    return unescape(found.group(1)) if found else None


def error_text(html: str) -> str:
    from html import unescape

    found = re.search(r'id="error-message">([^<]*)<', html)
    return unescape(found.group(1)) if found else ""


# ---------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("review-web")
    build_warehouse(root)
    return root


@pytest.fixture(scope="module")
def site(built, tmp_path_factory):
    """One server over a copy of the run (local mode), shared by the module's read-only tests."""
    root = tmp_path_factory.mktemp("review-web-site")
    copy_run(built, root)
    server = Server(root)
    yield server, root
    server.stop()


@pytest.fixture
def own_site(built, tmp_path):
    """A server over the test's own copy (for tests that write decisions)."""
    copy_run(built, tmp_path)
    server = Server(tmp_path)
    yield server, tmp_path
    server.stop()


# ---------------------------------------------------------------------------------------------------- tests


def test_every_response_carries_the_security_headers(site):
    server, _ = site
    anonymous = requests.get(f"{server.base}/", allow_redirects=False)  # no access token: a stranger
    assert anonymous.status_code == 401 and anonymous.headers["content-security-policy"] == CSP
    session = sign_in(server)
    for path in ("/", "/metrics", "/static/review.js", "/entry?id=nope", "/login"):
        response = session.get(f"{server.base}{path}")
        assert response.headers["content-security-policy"] == CSP, path
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
    assert session.get(f"{server.base}/entry?id=nope").status_code == 404
    cookie = next(c for c in session.cookies if c.name == "citegate_review_session")
    assert cookie.has_nonstandard_attr("HttpOnly") and cookie.get_nonstandard_attr("SameSite").lower() == "strict"
    # a DNS-rebinding page reaches the server under its own name: refused in local mode
    rebound = session.get(f"{server.base}/", headers={"Host": f"evil.example:{server.port}"})
    assert rebound.status_code == 400
    # no inline script or style anywhere (the CSP would block it; the pages must not need it)
    page = session.get(f"{server.base}/").text
    assert (
        "<style" not in page
        and " style=" not in page
        and re.findall(r"<script[^>]*>", page) == ['<script src="/static/review.js" defer>']
    )


def test_the_signing_secret_is_private_and_a_forged_cookie_is_a_stranger(site):
    server, root = site
    secret = root / "reviews.web-secret"
    assert secret.is_file() and secret.stat().st_mode & 0o777 == 0o600
    session = sign_in(server, "Bob")
    assert "reviewing as <strong>Bob</strong>" in session.get(f"{server.base}/").text
    cookie = session.cookies["citegate_review_session"]
    body, signature = cookie.split(".")
    import base64

    forged = base64.urlsafe_b64encode(json.dumps({"sid": "x", "reviewer": "Mallory"}).encode())
    for value in (forged.decode().rstrip("=") + "." + signature, body + "." + "0" * 64, body + ".\u00e9"):
        stranger = requests.get(f"{server.base}/", cookies={"citegate_review_session": value}, allow_redirects=False)
        assert stranger.status_code == 401 and "Mallory" not in stranger.text


def test_queue_groups_and_filters_match_the_warehouse(site):
    server, root = site
    published = root / "w.published.duckdb"
    session = sign_in(server)
    page = session.get(f"{server.base}/").text
    for reason, entries, open_, decided in rows(
        published,
        "select reason, count(*), count(*) filter (where status = 'open'), count(*) filter (where status <> 'open') "
        "from citation_queue group by reason",
    ):
        assert re.search(
            rf">{re.escape(reason)}</a></td><td class=\"num\">{entries:,}</td>\s*<td class=\"num\">{open_:,}</td>"
            rf"<td class=\"num\">{decided:,}</td>",
            page,
        ), reason
    [(surface, reason, owner, day)] = rows(
        published, "select surface, reason, owner, day from citation_queue order by citation_id limit 1"
    )
    week = date.fromordinal(day.toordinal() - day.weekday())
    cases = [
        ({"surface": surface}, "surface = $v", surface),
        ({"reason": reason}, "reason = $v", reason),
        ({"owner": owner}, "owner = $v", owner),
        ({"week": str(day)}, "date_trunc('week', day) = $v::date", week),
        ({"status": "open"}, "status = $v", "open"),
    ]
    for params, where, value in cases:
        expected = [
            cid
            for (cid,) in rows(
                published,
                f"select citation_id from citation_queue where {where} order by reason, day, citation_id limit 50",
                {"v": value},
            )
        ]
        got = session.get(f"{server.base}/", params=params)
        assert got.status_code == 200
        assert shown_ids(got.text) == expected, params
    assert session.get(f"{server.base}/", params={"status": "maybe"}).status_code == 400
    assert session.get(f"{server.base}/", params={"week": "last tuesday"}).status_code == 400


def test_paging_walks_every_entry_once_forward_and_back(site):
    server, root = site
    expected = [
        cid
        for (cid,) in rows(
            root / "w.published.duckdb", "select citation_id from citation_queue order by reason, day, citation_id"
        )
    ]
    assert len(expected) > 100  # three pages at least
    session = sign_in(server)
    url: str | None = f"{server.base}/"
    pages: list[list[str]] = []
    while url:
        html = session.get(url).text
        pages.append(shown_ids(html))
        nxt = link(html, "next-page")
        url = f"{server.base}{nxt}" if nxt else None
    assert [cid for page in pages for cid in page] == expected
    assert all(len(page) == 50 for page in pages[:-1])
    # from the last page back to the first
    back = link(session.get(f"{server.base}/", params={}).text, "next-page")
    second = session.get(f"{server.base}{back}").text
    previous = link(second, "previous-page")
    assert previous is not None
    assert shown_ids(session.get(f"{server.base}{previous}").text) == pages[0]


def test_an_entry_shows_what_a_reviewer_needs(site):
    server, root = site
    published = root / "w.published.duckdb"
    session = sign_in(server)
    [(cid, raw, model, better)] = rows(
        published,
        "select citation_id, judge_raw_answer, judge_model, better_chunk_id from citation_queue "
        "where judge_raw_answer is not null order by better_chunk_id is null, citation_id limit 1",
    )
    page = session.get(f"{server.base}/entry", params={"id": cid})
    assert page.status_code == 200
    [entry] = rows(
        published,
        "select claim, span, chunk_id, prompt_sha256, source_file, source_line, request_id, reason "
        "from citation_queue where citation_id = $c",
        {"c": cid},
    )
    claim, span, chunk_id, sha, source_file, source_line, request_id, reason = entry
    html = page.text
    for text in (claim, span, chunk_id, sha, f"{source_file}:{source_line}", request_id, reason, raw, model):
        assert escape(text) in html, text
    assert '<pre id="passage">' in html and "<mark>" in html  # the span highlighted in the passage
    assert '<pre id="prompt">' in html
    if better:
        assert escape(better) in html and '<pre id="better">' in html
    # a truncated span: the retrieved text with the part that never reached the prompt marked
    [(truncated,)] = rows(
        published, "select citation_id from citation_queue where reason = 'span_truncated' order by 1 limit 1"
    )
    cut = session.get(f"{server.base}/entry", params={"id": truncated}).text
    assert '<pre id="cut">' in cut and '<span class="cut"' in cut
    # previous / next follow the queue's order
    ordered = [
        c for (c,) in rows(published, "select citation_id from citation_queue order by reason, day, citation_id")
    ]
    i = ordered.index(cid)
    assert link(html, "next-entry") == "/entry?" + urlencode({"id": ordered[i + 1]})


def test_xss_payloads_in_claim_span_and_prompt_render_inert(site):
    server, root = site
    session = sign_in(server)
    [(cid,)] = rows(
        root / "w.published.duckdb",
        "select citation_id from citation_queue where request_id = 'xss-1' and span = $s",
        {"s": XSS_SPAN},
    )
    html = session.get(f"{server.base}/entry", params={"id": cid}).text
    assert escape(XSS_CLAIM) in html  # &lt;script&gt;window.__xss = &#34;claim&#34;&lt;/script&gt;…
    assert escape(XSS_SPAN) in html
    assert "&lt;script&gt;window.__xss = &#39;prompt&#39;&lt;/script&gt;" in html
    assert "<script>window" not in html and "<img src=x" not in html and "<svg" not in html and "<b>rise" not in html
    queue = session.get(f"{server.base}/", params={"surface": "test-surface"}).text
    assert str(escape(XSS_CLAIM))[:40] in queue and "<script>window" not in queue


def test_a_decision_goes_through_the_cli_validation_into_the_reviews_log(own_site):
    server, root = own_site
    published = root / "w.published.duckdb"
    session = sign_in(server, "Ann Reviewer")
    ordered = [
        c for (c,) in rows(published, "select citation_id from citation_queue order by reason, day, citation_id")
    ]
    first, second = ordered[0], ordered[1]
    page = session.get(f"{server.base}/entry", params={"id": first}).text
    token = csrf_of(page)

    def post(**fields):
        return session.post(f"{server.base}/decide", data={"csrf": token, "citation_id": first, **fields})

    refused = [
        (dict(outcome="approve"), "unknown outcome 'approve' (expected accept, repair or escalate)"),
        (dict(outcome="escalate"), "escalate needs --cause"),
        (dict(outcome="escalate", cause="weather"), "unknown cause 'weather'"),
        (dict(outcome="accept", cause="ranking"), "accept takes no --cause"),
        (dict(outcome="accept", citation_id="nope#0"), "no queue entry 'nope#0'"),
    ]
    for fields, message in refused:
        response = post(**fields)
        assert response.status_code == 400 and message in error_text(response.text), fields
    assert read_reviews(server.reviews) == []  # nothing written by a refused decision

    done = post(outcome="escalate", cause="truncation", note="cut <b>mid-sentence</b>")
    assert done.status_code == 200 and done.url.startswith(f"{server.base}/entry?id=")
    assert f"id={requests.utils.quote(second, safe='')}" in done.url  # on to the next entry
    assert "applies at the next run" in done.text and "Decided <strong>escalate</strong>" in done.text
    [line] = read_reviews(server.reviews)
    review = line.review
    assert review is not None
    [(reason, claim, passage)] = rows(
        published, "select reason, claim, passage from citation_queue where citation_id = $c", {"c": first}
    )
    assert (review.citation_id, review.outcome, review.cause, review.note, review.reviewer) == (
        first,
        "escalate",
        "truncation",
        "cut <b>mid-sentence</b>",
        "Ann Reviewer",
    )
    assert (review.queue_reason, review.claim, review.passage) == (reason, claim, passage)
    # shown at once, on the entry and in the queue, as decided but not yet applied; the note escaped
    entry = session.get(f"{server.base}/entry", params={"id": first}).text
    assert 'id="pending"' in entry and "escalate" in entry and "cut &lt;b&gt;mid-sentence&lt;/b&gt;" in entry
    queue = session.get(f"{server.base}/").text
    assert "decided: escalate, applies at the next run" in queue


def test_pages_read_only_the_published_copy_and_hold_no_connection(own_site):
    """The working file is never opened (here it is gone), and no connection outlives a request: a run may write
    the working file and replace the published copy at any moment."""
    import duckdb

    server, root = own_site
    for path in root.glob("w.duckdb*"):
        path.unlink()
    session = sign_in(server)
    [(cid,)] = rows(root / "w.published.duckdb", "select citation_id from citation_queue order by 1 limit 1")
    for path in ("/", "/metrics", "/chart.png", "/entry?" + urlencode({"id": cid})):
        assert session.get(f"{server.base}{path}").status_code == 200, path
    assert not any(root.glob("w.duckdb*"))
    writer = duckdb.connect(str(root / "w.published.duckdb"))  # a write lock: refused if the server held the file
    writer.close()
    (root / "w.published.duckdb").unlink()
    missing = session.get(f"{server.base}/")
    assert missing.status_code == 503 and "no published copy yet" in error_text(missing.text)


def test_a_post_without_the_sessions_csrf_token_is_refused(own_site):
    server, root = own_site
    [(cid,)] = rows(root / "w.published.duckdb", "select citation_id from citation_queue order by 1 limit 1")
    ann = sign_in(server, "Ann")
    bob = sign_in(server, "Bob")
    bobs_token = csrf_of(bob.get(f"{server.base}/").text)
    anns_token = csrf_of(ann.get(f"{server.base}/").text)
    attempts = [
        (ann, {}, {}),  # no token
        (ann, {"csrf": "0" * 64}, {}),  # a made-up token
        (ann, {"csrf": "é" * 64}, {}),  # not even ASCII: refused, not a server error
        (ann, {"csrf": bobs_token}, {}),  # another session's token
        (ann, {"csrf": anns_token}, {"Origin": "http://evil.example"}),  # a cross-origin form
        (requests.Session(), {"csrf": anns_token}, {}),  # no session cookie
    ]
    for client, extra, headers in attempts:
        response = client.post(
            f"{server.base}/decide", data={"citation_id": cid, "outcome": "accept", **extra}, headers=headers
        )
        assert response.status_code == 403, extra
    assert read_reviews(server.reviews) == []
    ok = ann.post(f"{server.base}/decide", data={"citation_id": cid, "outcome": "accept", "csrf": anns_token})
    assert ok.status_code == 200
    assert [line.review.reviewer for line in read_reviews(server.reviews) if line.review] == ["Ann"]


def test_metrics_cells_link_to_the_rows_citegate_trace_gives(site):
    server, root = site
    published = root / "w.published.duckdb"
    session = sign_in(server)
    html = session.get(f"{server.base}/metrics").text
    for name, numerator, denominator in rows(
        published,
        "select name, numerator, denominator from metric_definitions where name in "
        "('provenance_pass_rate', 'support_pass_rate', 'end_to_end_pass_rate', 'queue_repair_rate')",
    ):
        assert escape(name) in html and escape(numerator) in html and escape(denominator) in html
    assert '<img src="/chart.png"' in html
    chart = session.get(f"{server.base}/chart.png")
    assert chart.headers["content-type"] == "image/png" and chart.content[:8] == b"\x89PNG\r\n\x1a\n"
    from html import unescape

    cells = [unescape(h) for h in re.findall(r'<a href="(/trace\?[^"]+)"', html)]
    [(cell_count,)] = rows(published, "select count(*) from weekly_surface_metrics")
    assert len(cells) == cell_count
    for href in cells[:3]:
        trace = session.get(f"{server.base}{href}").text
        params = dict(parse_qsl(href.split("?", 1)[1]))
        expected = rows(
            published,
            "select citation_id from metric_lineage where metric = $m and surface = $s and week_start = $w::date "
            "and breakdown is null order by numerator_weight desc, citation_id limit 100",
            {"m": params["metric"], "s": params["surface"], "w": params["week"]},
        )
        got = [unescape(c) for c in re.findall(r'<td><a href="/entry\?id=[^"]*">([^<]*)</a>', trace)]
        assert got == [c for (c,) in expected] and got


def test_proxy_mode_takes_the_reviewer_from_the_trusted_header(built, tmp_path):
    copy_run(built, tmp_path)
    server = Server(tmp_path, "--auth", "proxy", "--auth-header", "X-Remote-User")
    try:
        assert requests.get(f"{server.base}/").status_code == 401  # not through the proxy: nobody
        proxied = requests.Session()
        proxied.headers["X-Remote-User"] = "carol@example.org"
        proxied.headers["Host"] = "review.example.org"  # the proxy's own name: not a loopback one
        page = proxied.get(f"{server.base}/")
        assert page.status_code == 200 and "carol@example.org" in page.text
        [(cid,)] = rows(tmp_path / "w.published.duckdb", "select citation_id from citation_queue order by 1 limit 1")
        entry = proxied.get(f"{server.base}/entry", params={"id": cid}).text
        done = proxied.post(
            f"{server.base}/decide", data={"citation_id": cid, "outcome": "repair", "csrf": csrf_of(entry)}
        )
        assert done.status_code == 200, error_text(done.text)
        assert [line.review.reviewer for line in read_reviews(server.reviews) if line.review] == ["carol@example.org"]
    finally:
        server.stop()


def test_tokens_mode_signs_in_with_a_reviewers_token(built, tmp_path):
    copy_run(built, tmp_path)
    tokens = tmp_path / "tokens"
    tokens.write_text("# reviewers\nDana Q 0123456789abcdef0123456789abcdef\nEli tok-eli-aaaaaaaaaaaaaaaaaaaaaaaa\n")
    tokens.chmod(0o644)
    refused = subprocess.run(
        [sys.executable, "-m", "citegate_assets.cli", "serve", "--auth", "tokens", "--tokens", str(tokens)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert refused.returncode == 2 and "readable by others" in refused.stderr and str(tokens) in refused.stderr
    tokens.chmod(0o600)
    bad = tmp_path / "bad-tokens"
    bad.write_text("Fay fay-aaaaaaaaaaaaaaaaaaaaaaaaaaaa\nGus short\n")
    bad.chmod(0o600)
    refused = subprocess.run(
        [sys.executable, "-m", "citegate_assets.cli", "serve", "--auth", "tokens", "--tokens", str(bad)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert refused.returncode == 2 and f"{bad}:2: the token of 'Gus' is too short" in refused.stderr
    server = Server(tmp_path, "--auth", "tokens", "--tokens", str(tokens))
    try:
        bearer = requests.get(f"{server.base}/", headers={"Authorization": "Bearer 0123456789abcdef0123456789abcdef"})
        assert bearer.status_code == 200 and "reviewing as <strong>Dana Q</strong>" in bearer.text
        browser = requests.Session()
        login = browser.get(f"{server.base}/login").text
        wrong = browser.post(f"{server.base}/login", data={"csrf": csrf_of(login), "token": "x" * 30, "next": "/"})
        assert wrong.status_code == 403
        signed = browser.post(
            f"{server.base}/login",
            data={"csrf": csrf_of(login), "token": "tok-eli-aaaaaaaaaaaaaaaaaaaaaaaa", "next": "/"},
        )
        assert signed.status_code == 200 and "reviewing as <strong>Eli</strong>" in signed.text
        tokens.write_text("Dana Q 0123456789abcdef0123456789abcdef\n")  # Eli's line removed: signed out
        assert browser.get(f"{server.base}/", allow_redirects=False).status_code == 303
    finally:
        server.stop()
