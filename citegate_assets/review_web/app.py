"""The review web page (`citegate serve`): the queue, one entry, decisions, the weekly metrics and their trace, and
the Label tab (labels from the warehouse's own traffic, blind: lib/calibration/own_labels.py,
lib/calibration/label_log.py).

Server-rendered with Starlette and Jinja2 (autoescape on: every logged value is escaped), one small static JS
file for the keyboard. Reads the published copy only, with a read-only connection per request, and the live
reviews log; decisions go through lib/review/reviews.py (make_review, append_review), exactly as `citegate review`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from citegate_assets.lib.core.paths import Settings
from citegate_assets.lib.metrics.preregistered import HEADLINE
from citegate_assets.lib.review.reviews import CAUSES, ReviewError, append_review, make_review
from citegate_assets.lib.storage.warehouse import query
from citegate_assets.review_web import csrf
from citegate_assets.review_web.auth import (
    COOKIE,
    DEFAULT_PROXY_HEADER,
    MODES,
    Session,
    Signer,
    TokenFile,
    clean_name,
    fingerprint,
    load_secret,
    new_session,
    same_token,
    secret_path,
)
from citegate_assets.review_web.entry import cut_pieces, passage_pieces, passage_source, prompt_pieces
from citegate_assets.review_web.headers import LOOPBACK_NAMES, SecurityHeaders
from citegate_assets.review_web.label_tab import LabelTab
from citegate_assets.review_web.queries import (
    PAGE_SIZE,
    STATUSES,
    ChartCache,
    Filters,
    GateLineCache,
    Key,
    LiveLabels,
    LiveLog,
    NotPublished,
    SampleCache,
    Warehouse,
    choices,
    dicts,
    key_of,
    neighbours,
    pending,
    queue_page,
)
from citegate_assets.review_web.server import BodyLimit, ServerLimits
from citegate_assets.review_web.sessions import SessionStore, Visitor

TRACE_ROWS = 100
ACCESS_PARAM = "token"  # local mode: ?token=ACCESS_TOKEN admits a browser, then leaves the URL
STRANGER = (
    "this review page serves only the person who started it: open the URL `citegate serve` printed (it carries "
    "an access token), or paste that token on the sign-in page"
)


@dataclass(frozen=True)
class ServeOptions:
    auth: str = "local"  # local | proxy | tokens
    auth_header: str = DEFAULT_PROXY_HEADER
    tokens: Path | None = None
    host: str = "127.0.0.1"
    access_token: str | None = None  # local mode: required; made at each start by `citegate serve`
    session_idle_s: float = 2 * 3600.0
    session_max_s: float = 12 * 3600.0
    limits: ServerLimits = field(default_factory=ServerLimits)


class ReviewApp(LabelTab):
    """The pages. The GET handlers are plain functions, so Starlette runs them in its thread pool: a DuckDB query
    never blocks the event loop, and several reviewers are served at once."""

    def __init__(self, settings: Settings, options: ServeOptions, clock: Callable[[], float] = time.monotonic) -> None:
        if options.auth not in MODES:
            raise ValueError(f"unknown --auth {options.auth!r} (expected one of: {', '.join(MODES)})")
        if options.auth == "tokens" and options.tokens is None:
            raise ValueError("--auth tokens needs --tokens FILE (one `NAME TOKEN` line per reviewer)")
        if options.auth == "local" and not options.access_token:
            raise ValueError("--auth local needs an access token (citegate serve makes one at each start)")
        self.settings = settings
        self.options = options
        self.warehouse = Warehouse(settings.published)
        self.log = LiveLog(settings.reviews)
        self.signer = Signer(load_secret(secret_path(settings.reviews)))
        self.sessions = SessionStore(options.session_idle_s, options.session_max_s, clock=clock)
        self.tokens = TokenFile(options.tokens) if options.auth == "tokens" and options.tokens else None
        self.chart = ChartCache()
        self.samples = SampleCache()
        self.labels = LiveLabels(settings.labels)
        self.gate_line = GateLineCache()
        folder = files("citegate_assets.review_web")
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(folder / "templates")),
            autoescape=True,  # every value from the logs (claims, spans, prompts, notes) is escaped
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.static = str(folder / "static")

    # ------------------------------------------------------------------------------------------------ plumbing

    def visitor(self, request: Request) -> Visitor:
        session = self.signer.load(request.cookies.get(COOKIE))
        new = session is None
        if session is None:
            session = new_session()
        # a revoked or expired session keeps its id for the sign-in form's CSRF token, and nothing else
        signed_in = None if new or self.options.auth == "proxy" else self.sessions.get(session.sid)
        reviewer: str | None = None
        if self.options.auth == "local":
            reviewer = signed_in.reviewer if signed_in else None
        elif self.options.auth == "proxy":
            reviewer = clean_name(request.headers.get(self.options.auth_header))
        elif self.tokens is not None:
            bearer = request.headers.get("authorization", "")
            if bearer.lower().startswith("bearer "):
                reviewer = self.tokens.reviewer_for(fingerprint(bearer[7:].strip()))
            elif signed_in is not None:
                reviewer = self.tokens.reviewer_for(signed_in.token)
        return Visitor(session, reviewer, new, signed_in)

    def sign_in(
        self, reviewer: str | None = None, token: str | None = None, replaces: Session | None = None
    ) -> Session:
        """A fresh session id held by the server (no session fixation); the one it replaces ends."""
        if replaces is not None:
            self.sessions.revoke(replaces.sid)
        session = new_session()
        self.sessions.open(session.sid, reviewer=reviewer, token=token)
        return session

    def admit(self, request: Request, visitor: Visitor) -> Response:
        """Local mode, `?token=` on a page: a browser with the access token is admitted (a session the server holds),
        then sent to the same page without the token in its URL; a wrong token is refused."""
        if not same_token(request.query_params.get(ACCESS_PARAM), self.options.access_token or ""):
            return self.error(request, visitor, 403, "refused: that is not this server's access token")
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != ACCESS_PARAM]
        target = _local_path(request.url.path + (f"?{urlencode(kept)}" if kept else ""))
        response: Response = RedirectResponse(target, status_code=303)
        if visitor.signed_in is None:
            self.set_cookie(request, response, self.sign_in(replaces=visitor.session))
        return response

    def render(self, request: Request, visitor: Visitor, name: str, status: int = 200, **context: Any) -> Response:
        template = self.env.get_template(name)
        context.setdefault("gate_line", None if visitor.reviewer is None else self.gate_line.line(self.warehouse))
        html = template.render(
            reviewer=visitor.reviewer,
            auth=self.options.auth,
            csrf_field=csrf.FIELD,
            csrf_token=csrf.token(self.signer, visitor.session),
            published=str(self.settings.published),
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        if visitor.new_cookie:
            self.set_cookie(request, response, visitor.session)
        return response

    def set_cookie(self, request: Request, response: Response, session: Session) -> None:
        response.set_cookie(
            COOKIE,
            self.signer.dump(session),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )

    def error(self, request: Request, visitor: Visitor, status: int, message: str) -> Response:
        return self.render(request, visitor, "error.html", status=status, status_code=status, message=message)

    def needs_reviewer(self, request: Request, visitor: Visitor) -> Response | None:
        """A response when nobody is known yet (sign in; in local mode a stranger without the access token gets 401),
        else None. In local mode a page's `?token=` is the access token, exchanged for a session first."""
        if self.options.auth == "local" and ACCESS_PARAM in request.query_params:
            return self.admit(request, visitor)
        if visitor.reviewer is not None:
            return None
        if self.options.auth == "local" and visitor.signed_in is None:
            return self.error(request, visitor, 401, STRANGER)
        if self.options.auth == "proxy":
            return self.error(
                request,
                visitor,
                401,
                f"no reviewer: this server takes the reviewer's name from the {self.options.auth_header} header, "
                "which the team's proxy sets; reach it through the proxy",
            )
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        response: Response = RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)
        if visitor.new_cookie:
            self.set_cookie(request, response, visitor.session)
        return response

    async def form(self, request: Request, visitor: Visitor) -> dict[str, str] | Response:
        """The POST's urlencoded fields (first value of each), or a 403/413 response (CSRF, size)."""
        body = await request.body()
        limit = self.options.limits.max_body_bytes  # BodyLimit has refused larger ones unread; this holds without it
        if len(body) > limit:
            return self.error(request, visitor, 413, f"form larger than {limit} bytes")
        try:
            parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            return self.error(request, visitor, 400, "the form is not UTF-8")
        fields = {name: values[0] for name, values in parsed.items()}
        host = None if self.options.auth == "proxy" else request.headers.get("host")
        known = None if visitor.new_cookie else visitor.session
        problem = csrf.problem(self.signer, known, fields.get(csrf.FIELD), request.headers.get("origin"), host)
        if problem is not None:
            return self.error(request, visitor, 403, f"refused: {problem}")
        return fields

    # ------------------------------------------------------------------------------------------------ pages

    def login_page(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if self.options.auth == "proxy":
            return self.needs_reviewer(request, visitor) or RedirectResponse("/", status_code=303)
        if self.options.auth == "local" and ACCESS_PARAM in request.query_params:
            return self.admit(request, visitor)
        return self.login_form(request, visitor, 200, _local_path(request.query_params.get("next")))

    def login_form(self, request: Request, visitor: Visitor, status: int, target: str, problem: str = "") -> Response:
        # local mode asks for the access token too until the browser has been admitted
        ask_token = self.options.auth == "tokens" or visitor.signed_in is None
        extra = {"problem": problem} if problem else {}
        return self.render(request, visitor, "login.html", status=status, next=target, ask_token=ask_token, **extra)

    async def login(self, request: Request) -> Response:
        visitor = self.visitor(request)
        fields = await self.form(request, visitor)
        if isinstance(fields, Response):
            return fields
        target = _local_path(fields.get("next"))
        if self.options.auth == "local":
            if visitor.signed_in is None:
                if not same_token(fields.get("token", "").strip(), self.options.access_token or ""):
                    return self.login_form(request, visitor, 403, target, "that is not this server's access token")
                admitted = self.sign_in(replaces=visitor.session)
                visitor = Visitor(admitted, None, True, self.sessions.get(admitted.sid))
            name = clean_name(fields.get("reviewer"))
            if name is None:
                return self.login_form(request, visitor, 400, target, "give your name (1–100 characters)")
            session = self.sign_in(reviewer=name, replaces=visitor.session)
        elif self.tokens is not None:
            token = (fields.get("token") or "").strip()
            if self.tokens.reviewer_for(fingerprint(token)) is None:
                return self.login_form(request, visitor, 403, target, "unknown token")
            session = self.sign_in(token=fingerprint(token), replaces=visitor.session)
        else:
            return self.error(request, visitor, 400, "sign-in is the proxy's job in proxy mode")
        response = RedirectResponse(target, status_code=303)
        self.set_cookie(request, response, session)  # a fresh session id: a new CSRF token after signing in
        return response

    async def logout(self, request: Request) -> Response:
        visitor = self.visitor(request)
        fields = await self.form(request, visitor)
        if isinstance(fields, Response):
            return fields
        self.sessions.revoke(visitor.session.sid)  # a copy of the cookie is a stranger's from now on
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    def queue(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if (early := self.needs_reviewer(request, visitor)) is not None:
            return early
        try:
            filters = Filters.parse(request.query_params)
            after = Key.parse(request.query_params) if request.query_params.get("dir") != "back" else None
            before = Key.parse(request.query_params) if request.query_params.get("dir") == "back" else None
        except ValueError as exc:
            return self.error(request, visitor, 400, str(exc))
        try:
            with self.warehouse.open() as con:
                groups = dicts(query(con, "web/queue_groups", filters.sql()))
                rows, has_previous, has_next = queue_page(con, filters, after, before, PAGE_SIZE)
                menus = choices(con)
        except NotPublished as exc:
            return self.error(request, visitor, 503, str(exc))
        latest = self.log.latest()
        carried = filters.query_items()
        for row in rows:
            row["pending"] = pending(latest, row)
            row["href"] = "/entry?" + urlencode([("id", row["citation_id"]), *carried])
        previous_href = next_href = None
        if rows and has_previous:
            previous_href = "/?" + urlencode([*carried, *key_of(rows[0]).encode(), ("dir", "back")])
        if rows and has_next:
            next_href = "/?" + urlencode([*carried, *key_of(rows[-1]).encode()])
        return self.render(
            request,
            visitor,
            "queue.html",
            filters=filters,
            groups=groups,
            total=sum(g["entries"] for g in groups),
            rows=rows,
            menus=menus,
            statuses=STATUSES,
            previous_href=previous_href,
            next_href=next_href,
            first_href="/?" + urlencode(carried),
            group_href=lambda reason: (
                "/?" + urlencode([*[(k, v) for k, v in carried if k != "reason"], ("reason", reason)])
            ),
        )

    def entry(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if (early := self.needs_reviewer(request, visitor)) is not None:
            return early
        citation_id = request.query_params.get("id")
        if citation_id is None:
            return self.error(request, visitor, 400, "which entry? /entry?id=CITATION_ID")
        try:
            filters = Filters.parse(request.query_params)
        except ValueError as exc:
            return self.error(request, visitor, 400, str(exc))
        try:
            with self.warehouse.open() as con:
                found = dicts(query(con, "review/queue_entry", {"citation_id": citation_id}))  # the id as given
                if not found:
                    return self.error(
                        request,
                        visitor,
                        404,
                        f"no queue entry {citation_id!r}: it passes both gates, or it is not in this warehouse",
                    )
                entry = found[0]
                chunk = {"request_id": entry["request_id"], "day": entry["day"]}
                [cited] = query(con, "web/chunk_text", {**chunk, "chunk_id": entry["chunk_id"]}).fetchall()
                better = None
                if entry.get("better_chunk_id"):
                    [row] = query(con, "web/chunk_text", {**chunk, "chunk_id": entry["better_chunk_id"]}).fetchall()
                    better = row[0] if row[0] is not None else row[1]  # as it stood in the prompt, else as retrieved
                applied = dict(query(con, "web/applied_reviews", {"citation_id": citation_id}).fetchall())
                previous_id, next_id = neighbours(con, filters, citation_id)
        except NotPublished as exc:
            return self.error(request, visitor, 503, str(exc))
        carried = filters.query_items()
        history = [(review, review.review_id in applied) for review in self.log.history(citation_id)]
        cut = None
        if entry["provenance_reason"] == "span_truncated":
            anchor = (entry["anchor_start"], entry["anchor_end"]) if entry.get("anchor_start") is not None else None
            cut = cut_pieces(cited[0], cited[1], anchor)
        prompt, where_found = prompt_pieces(entry)
        decided_id = request.query_params.get("decided")
        decided = self.log.latest().get(decided_id) if decided_id else None
        return self.render(
            request,
            visitor,
            "entry.html",
            e=entry,
            pending=pending(self.log.latest(), entry),
            passage=passage_pieces(entry),
            source=passage_source(entry),
            cut=cut,
            prompt=prompt,
            where_found=where_found,
            better=better,
            history=history,
            causes=CAUSES,
            carried=carried,
            decided=decided,
            queue_href="/?" + urlencode(carried),
            previous_href=None if previous_id is None else "/entry?" + urlencode([("id", previous_id), *carried]),
            next_href=None if next_id is None else "/entry?" + urlencode([("id", next_id), *carried]),
        )

    async def decide(self, request: Request) -> Response:
        """One decision, through the same make_review / append_review as `citegate review`."""
        visitor = self.visitor(request)
        if visitor.reviewer is None:
            return self.error(request, visitor, 403, "refused: no reviewer signed in")
        fields = await self.form(request, visitor)
        if isinstance(fields, Response):
            return fields
        citation_id = fields.get("citation_id")
        if citation_id is None:
            return self.error(request, visitor, 400, "the form names no citation_id: nothing was written")
        decision: dict[str, Any] = dict(
            citation_id=citation_id,
            outcome=fields.get("outcome", ""),
            cause=fields.get("cause") or None,
            note=fields.get("note") or None,
            reviewer=visitor.reviewer,
        )
        try:
            make_review(**decision, queue_reason="-", claim="-", passage=None)  # a bad outcome or cause first
            with self.warehouse.open() as con:
                rows = query(con, "report/review_lookup", {"citation_id": citation_id}).fetchall()
                try:
                    filters = Filters.parse(_Fields(fields))
                except ValueError:
                    filters = Filters()
                _, next_id = neighbours(con, filters, citation_id)
            if not rows:
                raise ReviewError(f"no queue entry {citation_id!r} (nothing was written)")
            reason, claim, passage, _status = rows[0]
            review = make_review(**decision, queue_reason=reason, claim=claim, passage=passage)
            if review.citation_id != citation_id:  # the id looked up is the id recorded, never altered
                raise ReviewError(f"the review would record {review.citation_id!r}, not {citation_id!r}")
            append_review(self.settings.reviews, review)
        except ReviewError as exc:
            return self.error(request, visitor, 400, f"not recorded: {exc}")
        except NotPublished as exc:
            return self.error(request, visitor, 503, str(exc))
        carried = filters.query_items()
        target = next_id if next_id is not None else citation_id
        return RedirectResponse(
            "/entry?" + urlencode([("id", target), *carried, ("decided", citation_id)]), status_code=303
        )

    def metrics(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if (early := self.needs_reviewer(request, visitor)) is not None:
            return early
        try:
            weeks = max(1, min(int(request.query_params.get("weeks", "4")), 52))
        except ValueError:
            return self.error(request, visitor, 400, "weeks must be a whole number")
        try:
            with self.warehouse.open() as con:
                rows = dicts(query(con, "metric_tables/metrics_report", {"weeks": weeks}))
                definitions = dicts(query(con, "web/metric_definitions"))
        except NotPublished as exc:
            return self.error(request, visitor, 503, str(exc))
        by_version = {(d["name"], d["version"]): d for d in definitions}
        latest_definition = {d["name"]: d for d in definitions}  # ordered by version: the last one wins
        tables = []
        for week in sorted({r["week_start"] for r in rows}, reverse=True):
            surfaces = sorted({r["surface"] for r in rows if r["week_start"] == week})
            cells = {(r["surface"], r["metric"]): r for r in rows if r["week_start"] == week}
            table = []
            for surface in surfaces:
                line = []
                for metric in HEADLINE:
                    cell = cells.get((surface, metric))
                    href = "/trace?" + urlencode({"metric": metric, "surface": surface, "week": week.isoformat()})
                    line.append(None if cell is None else {**cell, "href": href})
                table.append((surface, line))
            tables.append((week, table))
        shown = [by_version.get((r["metric"], r["definition_version"])) for r in rows]
        used = {d["name"]: d for d in shown if d is not None}
        return self.render(
            request,
            visitor,
            "metrics.html",
            headline=HEADLINE,
            definitions=[used.get(name) or latest_definition.get(name) for name in HEADLINE],
            tables=tables,
            weeks=weeks,
        )

    def chart_png(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if self.options.auth == "local" and ACCESS_PARAM in request.query_params:
            return self.admit(request, visitor)
        if visitor.reviewer is None:
            return Response(status_code=401)
        try:
            png = self.chart.png(self.warehouse)
        except NotPublished as exc:
            return self.error(request, visitor, 503, str(exc))
        return Response(png, media_type="image/png")

    def trace(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if (early := self.needs_reviewer(request, visitor)) is not None:
            return early
        params = request.query_params
        try:
            day = date.fromisoformat(params.get("week", ""))
            offset = max(0, int(params.get("offset", "0")))
        except ValueError:
            return self.error(request, visitor, 400, "week must be a date (YYYY-MM-DD) and offset a whole number")
        cell_params = {
            "metric": params.get("metric", ""),
            "surface": params.get("surface", ""),
            "week": day - timedelta(days=day.weekday()),
            "breakdown": params.get("breakdown") or None,
        }
        try:
            with self.warehouse.open() as con:
                cells = dicts(query(con, "metric_tables/trace_cell", cell_params))
                if not cells:
                    return self.error(request, visitor, 404, "no such metric cell (see the metrics page)")
                [totals] = dicts(query(con, "metric_tables/trace_totals", cell_params))
                rel = query(con, "metric_tables/trace_rows", cell_params).limit(TRACE_ROWS, offset=offset)
                rows = dicts(rel)
        except NotPublished as exc:
            return self.error(request, visitor, 503, str(exc))
        base = [(k, str(v)) for k, v in cell_params.items() if v is not None]
        for row in rows:
            row["href"] = "/entry?" + urlencode({"id": row["citation_id"]})
        more = totals["denominator_rows"] > offset + len(rows)
        return self.render(
            request,
            visitor,
            "trace.html",
            cell=cells[0],
            totals=totals,
            rows=rows,
            breakdown=cell_params["breakdown"],
            offset=offset,
            previous_href=None
            if offset == 0
            else "/trace?" + urlencode([*base, ("offset", str(max(0, offset - TRACE_ROWS)))]),
            next_href="/trace?" + urlencode([*base, ("offset", str(offset + TRACE_ROWS))]) if more else None,
        )


class _Fields:
    """A dict of form fields read like query parameters (Filters.parse)."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.fields.get(name, default)


def _local_path(target: str | None) -> str:
    """A redirect target on this server only (an open redirect would let a link send a reviewer elsewhere)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def create_app(
    settings: Settings, options: ServeOptions | None = None, clock: Callable[[], float] = time.monotonic
) -> Starlette:
    """The review page's app; `clock` (seconds) is what session expiry is measured on."""
    options = options or ServeOptions()
    review = ReviewApp(settings, options, clock)
    routes = [
        Route("/", review.queue),
        Route("/entry", review.entry),
        Route("/decide", review.decide, methods=["POST"]),
        Route("/metrics", review.metrics),
        Route("/chart.png", review.chart_png),
        Route("/trace", review.trace),
        Route("/label", review.label_page, methods=["GET"]),
        Route("/label", review.label, methods=["POST"]),
        Route("/login", review.login_page, methods=["GET"]),
        Route("/login", review.login, methods=["POST"]),
        Route("/logout", review.logout, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=review.static), name="static"),
    ]
    app = Starlette(routes=routes)
    allowed = None
    if options.auth == "local":
        allowed = LOOPBACK_NAMES | {options.host, f"[{options.host}]"}
    # outermost last: the Host check first, then the body read within its limits, then the pages
    app.add_middleware(BodyLimit, max_bytes=options.limits.max_body_bytes, timeout_s=options.limits.body_timeout_s)
    app.add_middleware(SecurityHeaders, allowed_hosts=allowed)
    app.state.review = review
    return app
