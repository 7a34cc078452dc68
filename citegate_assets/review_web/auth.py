"""Who is reviewing: the session cookie, and the three ways a reviewer's name is known.

- ``local``: only the person who started the server may use it. `citegate serve` makes an access token at each
  start (or takes ``CITEGATE_REVIEW_TOKEN``) and prints it once, as a URL; opening that URL (or pasting the token
  into the sign-in page) admits the browser, which then gives the reviewer's name once. Another user of the machine
  reaching 127.0.0.1 without the token is a stranger (401 on every page, 403 on every POST).
- ``proxy``: a trusted reverse proxy authenticates and sets a header (``--auth-header``, default
  X-Forwarded-User); citegate trusts it, so the port must be reachable by the proxy only.
- ``tokens``: a file of ``NAME TOKEN`` lines (``--tokens``); a reviewer sends ``Authorization: Bearer TOKEN`` or
  pastes the token once into the sign-in page, and the session holds its fingerprint (removing the line from the
  file signs that reviewer out at the next request).

The cookie is ``payload.signature``: the payload is base64url JSON naming a random session id, the signature
HMAC-SHA256 under a secret kept in a 0600 file beside the reviews log (generated on first start). Who the session
belongs to, and whether it is still alive, is held by the server (sessions.py), never by the cookie. Standard
library only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from citegate_assets.lib.core.folders import read_named_file

MODES = ("local", "proxy", "tokens")
DEFAULT_PROXY_HEADER = "X-Forwarded-User"
COOKIE = "citegate_review_session"
SECRET_BYTES = 32
MIN_TOKEN_CHARS = 24
MAX_NAME_CHARS = 100
TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-.~+/=]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class AuthError(ValueError):
    """A bad secret or tokens file; the message names the file (and line)."""


def secret_path(reviews: Path) -> Path:
    """The signing secret's file: beside the reviews log folder, never inside it (the pipeline reads that)."""
    return reviews.with_name(reviews.name + ".web-secret")


def load_secret(path: Path) -> bytes:
    """The secret in `path`, generated (0600, created exclusively) when missing; a file others can read is refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(secrets.token_hex(SECRET_BYTES) + "\n")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise AuthError(f"{path}: the review page's signing secret is readable by others (mode {mode:o}); chmod 600 it")
    text = _read(path).decode("ascii", errors="replace").strip()
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise AuthError(f"{path}: not a review-page secret (64 hex digits); delete it to have a new one generated")
    return bytes.fromhex(text)


def _read(path: Path) -> bytes:
    """A regular file's bytes, opened without blocking (a FIFO in its place is an error, not a hang)."""
    try:
        return read_named_file(path)
    except IsADirectoryError as exc:
        raise AuthError(str(exc)) from None


def clean_name(value: str | None) -> str | None:
    """A reviewer name as it is recorded: stripped, 1..100 characters, no control characters; else None."""
    if value is None:
        return None
    name = value.strip()
    if not name or len(name) > MAX_NAME_CHARS or _CONTROL.search(name):
        return None
    return name


@dataclass(frozen=True)
class Session:
    sid: str  # random, names the browser session; the CSRF token is bound to it, the server's store to its owner


class Signer:
    def __init__(self, secret: bytes) -> None:
        self.secret = secret

    def sign(self, purpose: str, text: str) -> str:
        return hmac.new(self.secret, f"{purpose}\n{text}".encode(), hashlib.sha256).hexdigest()

    def dump(self, session: Session) -> str:
        payload = json.dumps({"sid": session.sid})
        body = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
        return f"{body}.{self.sign('session', body)}"

    def load(self, cookie: str | None) -> Session | None:
        """The session in a cookie, or None when it is missing, malformed or its signature does not match."""
        if not cookie or cookie.count(".") != 1:
            return None
        body, signature = cookie.split(".")
        if not hmac.compare_digest(signature.encode(), self.sign("session", body).encode()):  # bytes: any text
            return None
        try:
            record = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except ValueError:
            return None
        if not isinstance(record, dict) or not isinstance(record.get("sid"), str):
            return None
        return Session(record["sid"])


def new_session() -> Session:
    return Session(secrets.token_urlsafe(32))


def new_access_token() -> str:
    """The local mode's access token: made at each start, printed once."""
    return secrets.token_urlsafe(32)


def check_access_token(token: str, source: str) -> str:
    """A given access token (CITEGATE_REVIEW_TOKEN), checked like a reviewer token; the error never shows it."""
    if len(token) < MIN_TOKEN_CHARS or not TOKEN_CHARS.fullmatch(token):
        raise AuthError(
            f"{source}: the access token is too short or holds other characters (at least {MIN_TOKEN_CHARS} of "
            "A-Z a-z 0-9 - _ . ~ + / =)"
        )
    return token


def same_token(sent: str | None, expected: str) -> bool:
    """Whether a sent token is the expected one, in constant time (hashed first: any length, any text)."""
    if not sent:
        return False
    return hmac.compare_digest(hashlib.sha256(sent.encode()).digest(), hashlib.sha256(expected.encode()).digest())


def fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:32]


class TokenFile:
    """Reviewer tokens: ``NAME TOKEN`` per line (``#`` comments, blank lines ignored), re-read when it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._by_fingerprint: dict[str, str] = {}
        self._load()

    def _load(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            raise AuthError(f"{self.path}: tokens file not found") from None
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise AuthError(f"{self.path}: the tokens file is readable by others; chmod 600 it")
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        by_fingerprint: dict[str, str] = {}
        for n, line in enumerate(_read(self.path).decode("utf-8", errors="replace").splitlines(), start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            name, _, token = text.rpartition(" ")
            reviewer = clean_name(name)
            if reviewer is None:
                raise AuthError(f"{self.path}:{n}: expected `NAME TOKEN` (a reviewer name, a space, a token)")
            if len(token) < MIN_TOKEN_CHARS or not TOKEN_CHARS.fullmatch(token):
                raise AuthError(
                    f"{self.path}:{n}: the token of {reviewer!r} is too short or holds other characters "
                    f"(at least {MIN_TOKEN_CHARS}; make one with "
                    "`python -c 'import secrets; print(secrets.token_urlsafe())'`)"
                )
            key = fingerprint(token)
            if key in by_fingerprint:
                raise AuthError(f"{self.path}:{n}: this token is also {by_fingerprint[key]!r}'s; give each their own")
            by_fingerprint[key] = reviewer
        self._by_fingerprint, self._stamp = by_fingerprint, stamp

    def reviewer_for(self, fingerprint_: str | None) -> str | None:
        if fingerprint_ is None:
            return None
        with self._lock:
            self._load()
            for known, reviewer in self._by_fingerprint.items():
                if hmac.compare_digest(known, fingerprint_):
                    return reviewer
        return None
