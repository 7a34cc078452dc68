"""Logged text on a terminal: control characters are shown, never obeyed.

Claims, spans, passages, ids, surfaces, file names, notes and reject details come from logs and reviewers.
Printed raw, ESC [ 2J clears the screen, an OSC 8 sequence hides a link, a CR or backspace rewrites a line,
U+202E reverses it, and a newline starts a line that looks like the tool's own ("[accepted by cfo]").
``safe`` renders every such character as a visible escape (``\\x1b``, ``\\r``, ``\\n``, ``\\u202e``);
``quote`` is the same inside quotes, for messages that name a value. No dagster import: the CLI's readers
load this alone.
"""

from __future__ import annotations

import unicodedata

# C0/C1 controls (Cc), format characters incl. bidi overrides and isolates (Cf), lone surrogates (Cs),
# and the Unicode line/paragraph separators (Zl, Zp), which some terminals also break lines on
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe(value: object, *, newlines: bool = False) -> str:
    """``value`` as text with every control and format character rendered visibly.

    newlines=True keeps "\\n" as a real line break (for a multi-line passage, every line of which is still
    escaped); everything else in ESCAPED_CATEGORIES, CR and tab included, is always escaped.
    """
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():  # fast path: no Cc, Cf, Cs, Zl, Zp (nor Co, Cn, odd spaces, which pass unchanged)
        return text
    out = []
    for ch in text:
        if ch == "\n" and newlines:
            out.append(ch)
        elif ch.isprintable() or unicodedata.category(ch) not in ESCAPED_CATEGORIES:
            out.append(ch)
        else:
            out.append(_escape(ch))
    return "".join(out)


def quote(value: object) -> str:
    """``value`` in quotes for a message ("no queue entry ' r1#2'"): its repr, so leading or trailing blanks show."""
    return safe(repr(value if isinstance(value, str) else str(value)))


def ident(value: object) -> str:
    """An id as stored: bare when that is unambiguous, quoted when it is empty or has blanks at either end
    (" r1#2" and "r1#2" are two ids), escaped either way."""
    text = value if isinstance(value, str) else str(value)
    return safe(text) if text and text == text.strip() else quote(text)
