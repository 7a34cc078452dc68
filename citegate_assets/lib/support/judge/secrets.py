"""Secrets out of what a judge answered: the configured keys never reach the warehouse, the lake, a log or a page.

A gateway may echo the key it was sent, in a reply, an error body or a batch result. Every text a judge returns
(lib/support/judging.py stores each result row and batch state through `SecretMask`, and the clients mask their error
texts and logs with it) has each secret replaced by `***`:

- the secrets: the value of every configured key variable (`[judge] api_key_env` and `[judge.secondary]
  api_key_env`, read when the judge is built) and any credential in a judge's base URL (user, password, query);
- the forms: as written, and with any of its characters escaped the ways a reply carries text: JSON escapes
  (`\\u0073`, `\\/`, `\\"`, at any depth of escaping, each character escaped or not) and URL escapes (`%2F`);
- `Bearer <token>` whatever the token.

A value shorter than MIN_SECRET characters is not masked (it would blank ordinary words of every answer); the
factory's placeholder for "no key" is not a secret either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
MIN_SECRET = 4
NO_KEY = "unused"  # the key sent to an endpoint that needs none (factory.py)
_BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)


class SecretMask:
    """Replaces every secret in a text by MASK (see the module docstring for the forms)."""

    def __init__(self, secrets: Iterable[str] = ()):
        values = sorted({s for s in secrets if s and len(s) >= MIN_SECRET and s != NO_KEY}, key=len, reverse=True)
        self.count = len(values)
        self._pattern = re.compile("|".join(_escaped_forms(s) for s in values)) if values else None

    def __repr__(self) -> str:  # never the values
        return f"SecretMask({self.count} secrets)"

    def __call__(self, text: str) -> str:
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        return _BEARER.sub(r"\1" + MASK, text)

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self(text)


NO_SECRETS = SecretMask()


def _escaped_forms(secret: str) -> str:
    """A pattern matching `secret` with each character as written, JSON-escaped (any depth) or URL-escaped."""
    return "".join(_char_forms(c) for c in secret)


def _char_forms(c: str) -> str:
    code = ord(c)
    forms = [re.escape(c)]
    if code <= 0xFFFF:
        forms.append(rf"\\+u(?i:{code:04x})")
    if c in '"\\/':
        forms.append(r"\\+" + re.escape(c))
    if code < 0x80:
        forms.append(rf"%(?i:{code:02x})")
    return "(?:" + "|".join(forms) + ")"


def url_secrets(base_url: str | None) -> list[str]:
    """The credentials in a base URL: user, password, the query and each of its values (`?api-key=...`), as written
    in the URL and decoded."""
    if not base_url:
        return []
    parts = urlsplit(base_url)
    pieces = [parts.username, parts.password, parts.query, *(value for _, value in parse_qsl(parts.query))]
    return sorted({form for piece in pieces if piece for form in (piece, unquote(piece))})


def secret_mask_of(judge: object) -> SecretMask:
    """The mask of a judge or batch client (its `secret_mask`); an offline judge sends no key: it has none."""
    mask = getattr(judge, "secret_mask", None)
    return mask if isinstance(mask, SecretMask) else NO_SECRETS
