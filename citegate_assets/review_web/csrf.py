"""CSRF protection for every POST: a token bound to the session (HMAC of its id), carried by each form, and a
same-origin check on the Origin header when the browser sends one. A POST failing either is refused with 403."""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from citegate_assets.review_web.auth import Session, Signer

FIELD = "csrf"


def token(signer: Signer, session: Session) -> str:
    """The token the session's forms carry; another site cannot compute it without the secret."""
    return signer.sign("csrf", session.sid)


def problem(
    signer: Signer, session: Session | None, sent: str | None, origin: str | None, host: str | None
) -> str | None:
    """Why a POST is refused, or None when its token matches its session and its origin is this server."""
    if session is None:
        return "no session cookie: reload the page and try again"
    if not sent:
        return "the form carries no CSRF token"
    if not hmac.compare_digest(sent.encode(), token(signer, session).encode()):  # bytes: a non-ASCII value is no match
        return "the CSRF token does not match this session: reload the page and try again"
    if origin and origin != "null" and host and urlsplit(origin).netloc != host:
        return f"cross-origin POST from {origin}"
    return None
