"""Template profiles: where a serving layer put the context block and how it rendered each chunk.

A profile is data (regular expressions and a few choices), so a user defines one in citegate.toml
with the same fields the built-ins use. `split_prompt` cuts decoded messages into pieces that keep
their structural role; the pieces are normalized and joined later (see ingest_frames).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from citegate_assets.lib.ingest.normalize_plain import normalize_str, unescape_html

CHUNK_REFS = ("chunk_id", "position", "content")
UNESCAPES = ("none", "html")
CONTEXT_MESSAGES = ("any", "system", "user")


@dataclass(frozen=True)
class Profile:
    name: str
    # each field's "doc" is its line in docs/configuration-reference.md ([templates.NAME])
    context_start: str = field(
        metadata={"doc": "regex (required): the context block begins right after its first match"}
    )
    chunk_header: str = field(
        metadata={"doc": "regex (required) with a named group (?P<ref>...): each match opens one chunk section"}
    )
    context_end: str | None = field(
        default=None,
        metadata={"doc": "regex: the block ends at its first match after the start; unset = end of message"},
    )
    chunk_footer: str | None = field(
        default=None,
        metadata={"doc": "regex: a section's body ends at its first match; unset = next header or block end"},
    )
    chunk_ref: str = field(
        default="chunk_id",
        metadata={"doc": "what the header's ref carries: the chunk id, a 1-based position, or the chunk's content"},
    )
    unescape: str = field(default="none", metadata={"doc": "html: the template HTML-escaped chunk text and question"})
    context_message: str = field(
        default="any", metadata={"doc": "in a chat body, which role's message holds the context block"}
    )
    description: str = field(default="", metadata={"doc": "what the profile is for, in words"})
    _compiled: dict[str, re.Pattern[str] | None] = field(default_factory=dict, compare=False, repr=False)

    def regex(self, which: str) -> re.Pattern[str] | None:
        """The compiled pattern of field `which`; None when it is unset (context_end, chunk_footer)."""
        if which not in self._compiled:
            pattern = getattr(self, which)
            self._compiled[which] = re.compile(pattern, re.MULTILINE) if pattern else None
        return self._compiled[which]

    def required_regex(self, which: str) -> re.Pattern[str]:
        """The compiled pattern of a field every profile sets (context_start, chunk_header)."""
        compiled = self.regex(which)
        if compiled is None:
            raise ProfileError(f"profile {self.name!r}: {which} is empty")
        return compiled


class ProfileError(ValueError):
    pass


def validate_profile(p: Profile, where: str) -> None:
    """Errors name the config key at fault."""
    if p.chunk_ref not in CHUNK_REFS:
        raise ProfileError(f"{where}.chunk_ref = {p.chunk_ref!r}: expected one of {', '.join(CHUNK_REFS)}")
    if p.unescape not in UNESCAPES:
        raise ProfileError(f"{where}.unescape = {p.unescape!r}: expected one of {', '.join(UNESCAPES)}")
    if p.context_message not in CONTEXT_MESSAGES:
        raise ProfileError(
            f"{where}.context_message = {p.context_message!r}: expected one of {', '.join(CONTEXT_MESSAGES)}"
        )
    for key in ("context_start", "context_end", "chunk_header", "chunk_footer"):
        pattern = getattr(p, key)
        if pattern is None:
            continue
        try:
            compiled = re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            raise ProfileError(f"{where}.{key}: invalid regular expression: {exc}") from None
        if key == "chunk_header" and "ref" not in compiled.groupindex:
            raise ProfileError(f"{where}.chunk_header must contain a named group (?P<ref>...)")


AUTO = "auto"  # no patterns: each retrieved chunk is found in the prompt by its content (lib/ingest/locate.py)

BUILTIN_PROFILES: dict[str, Profile] = {
    p.name: p
    for p in [
        Profile(
            name=AUTO,
            description="No configuration: each retrieved chunk is found in the prompt by its text (whole, cut off, "
            "or in pieces); the chunks found and the template text between them are the context block",
            context_start=r"(?!)",
            chunk_header=r"(?P<ref>(?!))",
            chunk_ref="content",
        ),
        Profile(
            name="anthropic-xml",
            description="Anthropic long-context XML: <documents><document index=N><source>ID</source>"
            "<document_content>TEXT</document_content></document>...</documents>",
            context_start=r"<documents>",
            context_end=r"</documents>",
            chunk_header=r"<document\b[^>]*>\s*<source>(?P<ref>[^<]*)</source>\s*<document_content>",
            chunk_footer=r"</document_content>",
            chunk_ref="chunk_id",
        ),
        Profile(
            name="llamaindex-citation",
            description="LlamaIndex CitationQueryEngine: 'Source N:' sections between the '------' fences "
            "before 'Query:'; the few-shot example above the fences is not context",
            context_start=r"^------[ \t]*\n",
            context_end=r"^------[ \t]*\n(?=Query:)",
            chunk_header=r"^[ \t]*Source (?P<ref>\d+):[ \t]*$",  # multimodal=True renders "\n Source 2:"
            chunk_ref="content",
        ),
        Profile(
            name="langchain-stuff",
            description="LangChain stuff chain (chat): context after the '----------------' line of the "
            "system message, chunks '[ID] TEXT' separated by blank lines; question in the user message (in a "
            "one-message prompt the block ends at 'Human:' or Llama 3's <|eot_id|>)",
            context_start=r"^-{16,}[ \t]*$\n?",
            context_end=r"^(?:Human|User): |<\|eot_id\|>",
            chunk_header=r"(?:\A[ \t]*|(?<=\n\n))\[(?P<ref>[^\]\n]+)\][ \t]?",
            chunk_ref="chunk_id",
            context_message="system",
        ),
        Profile(
            name="langchain-stuff-mustache",
            description="langchain-stuff rendered with template_format='mustache': chunk text and question "
            "HTML-escaped (&amp; &lt; &gt; &quot;)",
            context_start=r"^-{16,}[ \t]*$\n?",
            context_end=r"^(?:Human|User): |<\|eot_id\|>",
            chunk_header=r"(?:\A[ \t]*|(?<=\n\n))\[(?P<ref>[^\]\n]+)\][ \t]?",
            chunk_ref="chunk_id",
            unescape="html",
            context_message="system",
        ),
        Profile(
            name="plain-list",
            description="A line 'Context:' up to a line starting 'Question:'; each chunk a line '[ID] TEXT'",
            context_start=r"^Context:[ \t]*$\n?",
            context_end=r"^Question:",
            chunk_header=r"^\[(?P<ref>[^\]\n]+)\][ \t]?",
            chunk_ref="chunk_id",
        ),
    ]
}

# Piece kinds. Only "body" pieces carry chunk text; "context" is template text inside the block.
OUTSIDE, CONTEXT, HEADER, BODY = "outside", "context", "header", "body"


@dataclass
class Piece:
    message_no: int
    kind: str
    text: str
    section_no: int | None = None
    ref: str | None = None


def split_prompt(
    messages: list[tuple[str, str]], profile: Profile, retrieved: list[dict] | None = None
) -> tuple[list[Piece], bool]:
    """Cut a decoded prompt into structural pieces. Returns (pieces, context_block_found).

    The context block is sought in the first message (of the profile's role) where context_start
    matches; every other message is one OUTSIDE piece. With retrieved ([{chunk_id, text}], as logged), a
    header whose ref names no retrieved chunk (an id not retrieved, a position past the list) opens no
    section: it is body text (a Markdown "[link text](url)" line is not a chunk header); nor does a header
    or footer that lies inside the text of the chunk whose section it would end (_Sections).
    """
    pieces: list[Piece] = []
    found = False
    for message_no, (role, raw) in enumerate(messages):
        text = raw.replace("\r\n", "\n").replace("\r", "\n")  # line-based patterns need LF only
        if found or not _role_matches(role, profile.context_message):
            pieces.append(Piece(message_no, OUTSIDE, text))
            continue
        start = profile.required_regex("context_start").search(text)
        if start is None:
            pieces.append(Piece(message_no, OUTSIDE, text))
            continue
        found = True
        block_start = start.end()
        block_end = len(text)
        end_re = profile.regex("context_end")
        if end_re is not None:
            end = end_re.search(text, block_start)
            if end is not None:
                block_end = end.start()
        pieces.append(Piece(message_no, OUTSIDE, text[:block_start]))
        pieces.extend(_split_block(message_no, text[block_start:block_end], profile, retrieved))
        pieces.append(Piece(message_no, OUTSIDE, text[block_end:]))
    return pieces, found


def _role_matches(role: str, wanted: str) -> bool:
    return wanted == "any" or role == "text" or role == wanted


def _split_block(message_no: int, block: str, profile: Profile, retrieved: list[dict] | None) -> list[Piece]:
    ids = None if retrieved is None else [r["chunk_id"] for r in retrieved]
    headers = [
        h
        for h in profile.required_regex("chunk_header").finditer(block)
        if _names_a_chunk(h["ref"].strip(), profile, ids)
    ]
    out: list[Piece] = []
    cursor = 0
    for section_no, (header, body_end) in enumerate(_Sections(block, headers, profile, retrieved).ends()):
        if header.start() > cursor:
            out.append(Piece(message_no, CONTEXT, block[cursor : header.start()]))
        ref = header["ref"].strip()
        out.append(Piece(message_no, HEADER, block[header.start() : header.end()], section_no, ref))
        out.append(Piece(message_no, BODY, block[header.end() : body_end], section_no, ref))
        cursor = body_end
    # an empty context block still counts as found: its chunks were all dropped
    out.append(Piece(message_no, CONTEXT, block[cursor:]))
    return out


def _names_a_chunk(ref: str, profile: Profile, retrieved_ids: list[str] | None) -> bool:
    if retrieved_ids is None or profile.chunk_ref == "content":
        return True
    if profile.chunk_ref == "position":
        return ref.isdigit() and 1 <= int(ref) <= len(retrieved_ids)
    return ref in retrieved_ids


def _chunk_named(ref: str, profile: Profile, retrieved_ids: list[str]) -> str:
    """The retrieved chunk id a header's ref names (a ref _names_a_chunk accepted)."""
    return retrieved_ids[int(ref) - 1] if profile.chunk_ref == "position" else ref


SHOWN_CHARS = 40  # a duplicate header's body must hold this much of its chunk's opening (as locate's prefixes)
OPENING_PROBE_CHARS = 8  # where a chunk's text may start after template text in its section: its first characters
OPENING_TRIES = 8


class _Sections:
    """Where each chunk section of a block ends, given the retrieved texts.

    A boundary (a header naming a retrieved chunk, or a footer) ends the section before it, unless it lies inside
    that section's chunk text as placed: the section's body (after any template text such as metadata lines)
    through the boundary goes on with the chunk's own text (both normalized), and so does the text after it. So a
    chunk that quotes "[B] ..." or "</document_content>" neither opens B's section nor ends its own early. Of
    several sections one chunk still has (a look-alike where the chunk before it could not be followed), only
    those whose body shows the chunk's text stay; the others, or all when none does (they cannot be told apart),
    are text of no section, so no citation passes on them.
    """

    def __init__(self, block: str, headers: list[re.Match[str]], profile: Profile, retrieved: list[dict] | None):
        self.block, self.headers, self.profile = block, headers, profile
        self.footer_re = profile.regex("chunk_footer")
        self.by_id = None if retrieved is None else {r["chunk_id"]: r["text"] for r in retrieved}
        self.ids = [] if retrieved is None else [r["chunk_id"] for r in retrieved]
        self._texts: dict[str, str] = {}
        self._segments: dict[tuple[int, int], str] = {}

    def ends(self) -> list[tuple[re.Match[str], int]]:
        """(header, body end) of each section, in block order."""
        if self.by_id is None or self.profile.chunk_ref == "content":
            return [(h, self._first_boundary(h.end(), n + 1)[1]) for n, h in enumerate(self.headers)]
        sections: list[tuple[re.Match[str], int]] = []
        n = 0
        while n < len(self.headers):
            header = self.headers[n]
            body_end, n = self._placed_end(header, n + 1)
            sections.append((header, body_end))
        return self._told_apart(sections)

    def _chunk_of(self, header: re.Match[str]) -> str:
        ref = header["ref"].strip()
        return self.ids[int(ref) - 1] if self.profile.chunk_ref == "position" else ref

    def _first_boundary(self, pos: int, next_header: int) -> tuple[re.Match[str] | None, int]:
        """The first boundary at or after pos: the first footer before headers[next_header], else that header.
        Returns (the match, or None at the block's end; where it starts)."""
        limit = self.headers[next_header].start() if next_header < len(self.headers) else len(self.block)
        if self.footer_re is not None:
            footer = self.footer_re.search(self.block, pos, limit)
            if footer is not None:
                return footer, footer.start()
        return (self.headers[next_header] if next_header < len(self.headers) else None), limit

    def _placed_end(self, header: re.Match[str], next_header: int) -> tuple[int, int]:
        """(where the section this header opens ends, the index of the header that opens the next one)."""
        chunk_id = self._chunk_of(header)
        pos = header.end()
        placed: _Placed | None = None
        while True:
            while next_header < len(self.headers) and self.headers[next_header].start() < pos:
                next_header += 1  # a header overlapping a boundary that was the chunk's text
            boundary, at = self._first_boundary(pos, next_header)
            if boundary is None:
                return at, next_header
            if placed is None:
                placed = _Placed(self.by_id[chunk_id], self.profile.unescape)  # type: ignore[index]
            if not placed.may_hold(boundary.group()):  # the usual answer, without N
                return at, next_header
            if placed.text is None:
                placed.text = self._text(chunk_id)
            after = boundary.end()
            is_header = boundary is self._header(next_header)
            named = self._chunk_of(boundary) if is_header else chunk_id
            _, after_end = self._first_boundary(after, next_header + is_header)
            before, text, rest = self._segment(pos, at), self._segment(at, after), self._segment(after, after_end)
            if not placed.holds(before, text, rest, None if named == chunk_id else self._text(named)):
                return at, next_header
            pos = after

    def _header(self, n: int) -> re.Match[str] | None:
        return self.headers[n] if n < len(self.headers) else None

    def _told_apart(self, sections: list[tuple[re.Match[str], int]]) -> list[tuple[re.Match[str], int]]:
        chunk_ids = [self._chunk_of(header) for header, _ in sections]
        if len(set(chunk_ids)) == len(chunk_ids):
            return sections
        twice = {c for c, n in Counter(chunk_ids).items() if n > 1}
        return [
            (header, end)
            for (header, end), chunk_id in zip(sections, chunk_ids)
            if chunk_id not in twice or self._shows(chunk_id, self._segment(header.end(), end))
        ]

    def _shows(self, chunk_id: str, body: str) -> bool:
        text = self._text(chunk_id)
        return bool(body) and (text[:SHOWN_CHARS] in body or text.startswith(body))

    def _text(self, chunk_id: str) -> str:
        if chunk_id not in self._texts:
            self._texts[chunk_id] = normalize_str(self.by_id[chunk_id], self.profile.unescape)  # type: ignore[index]
        return self._texts[chunk_id]

    def _segment(self, start: int, end: int) -> str:
        """N of block[start:end]; each segment is read twice when the boundaries around it are judged."""
        if (start, end) not in self._segments:
            self._segments[(start, end)] = normalize_str(self.block[start:end], self.profile.unescape)
        return self._segments[(start, end)]


class _Placed:
    """One chunk's text followed through the block from its header on."""

    def __init__(self, raw_text: str, unescape: str):
        self.raw, self.unescape = raw_text, unescape  # the text as retrieved
        self.raw_at = 0  # where may_hold found the last boundary in it
        self.text: str | None = None  # the chunk's normalized text, read once a boundary may be in it
        self.at = 0  # how much of it the block's text matched from the header on

    def may_hold(self, boundary: str) -> bool:
        """A necessary test without N: each word of the boundary stands in the chunk's text, in order, after the
        last boundary's (a serving layer may re-space or HTML-escape a chunk's text, not change its words)."""
        words = (unescape_html(boundary) if self.unescape == "html" else boundary).split()
        at = self.raw_at
        for word in words:
            found = self.raw.find(word, at)
            if found < 0:
                return False
            at = found + len(word)
        self.raw_at = at
        return bool(words)

    def holds(self, before: str, boundary: str, after: str, named: str | None) -> bool:
        """The chunk's text goes on with the block's normalized text before the boundary, then the boundary, and
        the text after the boundary goes on with the chunk's rest, or holds all of it and then other text: not
        the text of the chunk the boundary names (named: a header's other chunk), which would put it where its
        header precedes it."""
        assert self.text is not None
        at = self._follow(self.at, before) if self.at else self._opening(before)
        at = None if at is None or not boundary else self._follow(at, boundary)
        if at is None:
            return False
        rest = at + 1 if self.text.startswith(" ", at) else at
        if len(after) <= len(self.text) - rest:
            goes_on = self.text.startswith(after, rest)
        else:
            goes_on = after.startswith(self.text[rest:]) and not (
                named and (after.startswith(named[:SHOWN_CHARS]) or named.startswith(after))
            )
        if goes_on:
            self.at = at
        return goes_on

    def _opening(self, body: str) -> int | None:
        """Where the chunk's text stands at the end of body, the start of a section: body is a prefix of it, or
        template text (metadata lines) and then a prefix of it."""
        assert self.text is not None
        if self.text.startswith(body):
            return len(body)
        probe = self.text[:OPENING_PROBE_CHARS]
        start = body.find(probe, 1)
        for _ in range(OPENING_TRIES):  # each try compares the rest of body: a few, not every occurrence
            if start < 0:
                return None
            if self.text.startswith(body[start:]):
                return len(body) - start
            start = body.find(probe, start + 1)
        return None

    def _follow(self, at: int, piece: str) -> int | None:
        """Where the chunk's text stands after piece, if piece is what follows `at` (normalized pieces are
        joined by one space, or none); None if it is not."""
        assert self.text is not None
        if not piece:
            return at
        if self.text.startswith(piece, at):
            return at + len(piece)
        if at and self.text.startswith(" ", at) and self.text.startswith(piece, at + 1):
            return at + 1 + len(piece)
        return None
