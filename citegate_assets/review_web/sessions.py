"""Signed-in sessions, held by the server: the cookie names a session, this store says whether it is still alive.

A session ends when it has been idle too long, when it is older than the absolute limit, or at sign-out
(`revoke`): a copy of its cookie is then a stranger's. The store is in memory, which is right because `citegate
serve` is one process; a restart signs everyone out. Only signed-in sessions are stored (a sign-in needs the
access token, a reviewer token or the proxy), so strangers cannot grow it; it is capped all the same, the session
seen longest ago going first. Keys are the SHA-256 of the session id: a lookup never compares secrets directly.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from citegate_assets.review_web.auth import Session

MAX_SESSIONS = 10_000


@dataclass
class SignedIn:
    reviewer: str | None  # local mode: the name given; None while admitted by the access token, before the name
    token: str | None  # tokens mode: the fingerprint of the token signed in with
    created: float  # clock seconds
    last_seen: float


class SessionStore:
    def __init__(
        self,
        idle_s: float,
        max_s: float,
        clock: Callable[[], float] = time.monotonic,
        capacity: int = MAX_SESSIONS,
    ) -> None:
        if idle_s <= 0 or max_s <= 0:
            raise ValueError("session lifetimes must be positive")
        self.idle_s = idle_s
        self.max_s = max_s
        self.clock = clock
        self.capacity = capacity
        self._lock = threading.Lock()
        self._by_key: OrderedDict[str, SignedIn] = OrderedDict()  # least recently seen first

    def open(self, sid: str, reviewer: str | None = None, token: str | None = None) -> SignedIn:
        now = self.clock()
        record = SignedIn(reviewer, token, now, now)
        with self._lock:
            self._drop_expired(now)
            while len(self._by_key) >= self.capacity:
                self._by_key.popitem(last=False)
            self._by_key[_key(sid)] = record
        return record

    def get(self, sid: str | None) -> SignedIn | None:
        """The live session named `sid` (its idle time restarts), or None: unknown, revoked or expired."""
        if not sid:
            return None
        key = _key(sid)
        now = self.clock()
        with self._lock:
            record = self._by_key.get(key)
            if record is None:
                return None
            if self._expired(record, now):
                del self._by_key[key]
                return None
            record.last_seen = now
            self._by_key.move_to_end(key)
            return record

    def revoke(self, sid: str | None) -> None:
        if sid:
            with self._lock:
                self._by_key.pop(_key(sid), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_key)

    def _expired(self, record: SignedIn, now: float) -> bool:
        return now - record.last_seen > self.idle_s or now - record.created > self.max_s

    def _drop_expired(self, now: float) -> None:
        # least recently seen first: the idle-expired ones are at the front
        for key in list(self._by_key):
            if not self._expired(self._by_key[key], now):
                break
            del self._by_key[key]
        # absolute expiry does not follow that order; sweep it when the store is full
        if len(self._by_key) >= self.capacity:
            for key in [k for k, r in self._by_key.items() if self._expired(r, now)]:
                del self._by_key[key]


def _key(sid: str) -> str:
    return hashlib.sha256(sid.encode()).hexdigest()


@dataclass
class Visitor:
    """Who is asking: the request's session, its reviewer once signed in, and whether the response sets a cookie."""

    session: Session
    reviewer: str | None
    new_cookie: bool
    signed_in: SignedIn | None = None  # the server's record of the session, while it is alive
