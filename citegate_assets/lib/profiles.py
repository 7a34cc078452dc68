"""Template profiles: where a serving layer put the context block and how it rendered each chunk.

A profile is data (regular expressions and a few choices), so a user defines one in citegate.toml
with the same fields the built-ins use. `split_prompt` cuts decoded messages into pieces that keep
their structural role; the pieces are normalized and joined later (see ingest_frames).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

CHUNK_REFS = ("chunk_id", "position", "content")
UNESCAPES = ("none", "html")
CONTEXT_MESSAGES = ("any", "system", "user")


@dataclass(frozen=True)
class Profile:
    name: str
    context_start: str  # regex: the context block begins right after its first match
    chunk_header: str  # regex with group (?P<ref>...): each match opens one chunk section
    context_end: str | None = None  # regex: the block ends at its first match after the start; None = end of message
    chunk_footer: str | None = None  # regex: a section's body ends at its first match; None = next header / block end
    chunk_ref: str = "chunk_id"  # what the header's ref carries: the chunk id, a 1-based position, or nothing usable
    unescape: str = "none"  # "html": the template HTML-escaped chunk text and question
    context_message: str = "any"  # in a chat body, which role's message holds the context block
    description: str = ""
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


AUTO = "auto"  # no patterns: each retrieved chunk is found in the prompt by its content (lib/locate.py)

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
    messages: list[tuple[str, str]], profile: Profile, retrieved_ids: list[str] | None = None
) -> tuple[list[Piece], bool]:
    """Cut a decoded prompt into structural pieces. Returns (pieces, context_block_found).

    The context block is sought in the first message (of the profile's role) where context_start
    matches; every other message is one OUTSIDE piece. With retrieved_ids, a header whose ref names no
    retrieved chunk (an id not retrieved, a position past the list) opens no section: it is body text
    (a Markdown "[link text](url)" line is not a chunk header).
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
        pieces.extend(_split_block(message_no, text[block_start:block_end], profile, retrieved_ids))
        pieces.append(Piece(message_no, OUTSIDE, text[block_end:]))
    return pieces, found


def _role_matches(role: str, wanted: str) -> bool:
    return wanted == "any" or role == "text" or role == wanted


def _split_block(message_no: int, block: str, profile: Profile, retrieved_ids: list[str] | None) -> list[Piece]:
    out: list[Piece] = []
    headers = [
        h
        for h in profile.required_regex("chunk_header").finditer(block)
        if _names_a_chunk(h["ref"].strip(), profile, retrieved_ids)
    ]
    footer_re = profile.regex("chunk_footer")
    cursor = 0
    for section_no, header in enumerate(headers):
        if header.start() > cursor:
            out.append(Piece(message_no, CONTEXT, block[cursor : header.start()]))
        out.append(Piece(message_no, HEADER, block[header.start() : header.end()], section_no, header["ref"].strip()))
        body_end = headers[section_no + 1].start() if section_no + 1 < len(headers) else len(block)
        if footer_re is not None:
            footer = footer_re.search(block, header.end(), body_end)
            if footer is not None:
                body_end = footer.start()
        out.append(Piece(message_no, BODY, block[header.end() : body_end], section_no, header["ref"].strip()))
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
