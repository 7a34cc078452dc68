"""A batch's retrieved chunks as rows of `retrievals`, and as stored: a text the prompt holds is kept as its offsets
there rather than a second copy (retrievals_stored_once; docs/warehouse.md, "retrievals")."""

from __future__ import annotations

import json

import polars as pl

from citegate_assets.lib.ingest.frames import Frames, _frame, _unescape_of
from citegate_assets.lib.ingest.locate import find_text
from citegate_assets.lib.ingest.normalize import normalize

RETRIEVAL_COLUMNS = [
    "request_id",
    "day",
    "chunk_id",
    "rank",
    "position",
    "doc_id",
    "chunking",
    "text",
    "text_normalized",
    "in_prompt",
    "text_source",
    "raw_start",  # where the text as logged stands in prompt_raw (stored only by retrievals_stored_once)
    "raw_end",
    "raw_encoding",
]
RAW_SPAN = ["raw_start", "raw_end", "raw_encoding"]


# Schema 9: a retrieved text's normalized form is stored once. Where it equals the body of the first prompt section
# holding that chunk (most chunks reach the prompt whole), retrievals.text_normalized is null and
# [prompt_start, prompt_end) locates it in prompts.prompt_normalized. Schema 11: the same for the text as logged,
# where it stands verbatim in prompts.prompt_raw (a plain-text prompt): retrievals.text is null and
# [raw_start, raw_end) locates it. Schema 13: also where it stands there as the body of a JSON string (a prompt
# logged as JSON chat messages escapes it), raw_encoding 'json'. False writes both twice, as schema 8 did (the
# tests' reference for what readers must get back).
STORE_RETRIEVED_TEXT_ONCE = True


def retrievals_stored_once(frames: Frames) -> pl.DataFrame:
    """frames.retrievals as stored: text_normalized null, with prompt_start/prompt_end, where the first section
    resolving to the chunk holds exactly that text (readers: coalesce with the substring of prompt_normalized);
    text null, with raw_start/raw_end, where the text as logged stands in prompt_raw, verbatim or (raw_encoding
    'json') JSON-escaped (readers: coalesce with that substring of prompt_raw, decoded by json_extract_string when
    escaped; docs/warehouse.md, "retrievals"). Offsets count characters, as DuckDB's substr does."""
    first = (
        frames.sections.filter(pl.col("chunk_id").is_not_null())
        .sort("request_id", "section_no")
        .unique(["request_id", "chunk_id"], keep="first", maintain_order=True)
        .select("request_id", "chunk_id", prompt_start="body_start", prompt_end="body_end")
    )
    bodies = first.join(frames.prompts.select("request_id", "prompt_normalized"), on="request_id").select(
        "request_id",
        "chunk_id",
        "prompt_start",
        "prompt_end",
        body=pl.col("prompt_normalized").str.slice(
            pl.col("prompt_start"), pl.col("prompt_end") - pl.col("prompt_start")
        ),
    )
    same = pl.col("body").is_not_null() & (pl.col("body") == pl.col("text_normalized"))
    return (
        frames.retrievals.join(bodies, on=["request_id", "chunk_id"], how="left", maintain_order="left")
        .with_columns(
            text_normalized=pl.when(same).then(None).otherwise(pl.col("text_normalized")),
            prompt_start=pl.when(same).then(pl.col("prompt_start")),
            prompt_end=pl.when(same).then(pl.col("prompt_end")),
            text=pl.when(pl.col("raw_start").is_not_null()).then(None).otherwise(pl.col("text")),
        )
        .drop("body")
    )


def stored_twice(frames: Frames) -> pl.DataFrame:
    """frames.retrievals with every text stored (schema 8's layout, the tests' reference): no raw span."""
    return frames.retrievals.with_columns(pl.lit(None, pl.Int32).alias(c) for c in RAW_SPAN[:2]).with_columns(
        raw_encoding=pl.lit(None, pl.String)
    )


NOWHERE = (None, None, None)


class TextForms:
    """One distinct chunk text of a batch and what _raw_span needs of it, worked out once (a chunk many requests
    retrieved is scanned once: `"\\x00" in text` alone is a character loop on a non-Latin-1 text); its JSON forms
    only once a verbatim search has failed. `text` is the batch's one object for it: polars then encodes a chunk
    that many requests retrieved once."""

    __slots__ = ("_json", "ascii", "newline", "storable", "text")

    def __init__(self, text: str):
        self.text = text
        self.storable = bool(text) and "\x00" not in text  # json_extract_string would not give a NUL back
        self.newline = "\n" in text
        self.ascii = text.isascii()
        self._json: tuple[str, ...] | None = None

    @property
    def json(self) -> tuple[str, ...]:
        """Its JSON string bodies that differ from it (_json_forms)."""
        if self._json is None:
            self._json = _json_forms(self.text)
        return self._json


def _json_forms(text: str) -> tuple[str, ...]:
    """The text as the body of a JSON string, as json.dumps writes it without and with ensure_ascii (they differ on
    non-ASCII text and on DEL, which only the latter escapes; the SDKs' HTTP clients write the first), each form
    once and only where it differs from the text (the verbatim search has answered for that one)."""
    forms = []
    for ensure_ascii in (False, True):
        body = json.dumps(text, ensure_ascii=ensure_ascii)[1:-1]
        if body != text and body not in forms:
            forms.append(body)
    return tuple(forms)


def _raw_span(
    prompt: str, forms: TextForms, newline: bool, ascii_prompt: bool, after: int = 0
) -> tuple[int | None, int | None, str | None]:
    """(raw_start, raw_end, raw_encoding): a place where the text stands in the prompt as logged, verbatim (encoding
    None) or as the body of a JSON string ('json': a prompt logged as JSON chat messages escapes quotes, backslashes,
    line breaks and often every non-ASCII character); NOWHERE when it does not. A python_repr prompt's escaping
    depends on the quote its repr chose, which DuckDB cannot undo: such a text stays stored (NOWHERE). after: where
    the request's previous chunk was found (its end), sought from first: chunks mostly stand in retrieved order, and
    the span only has to hold the text, not be its first place."""
    text = forms.text
    if not forms.storable:
        return NOWHERE
    if (newline or not forms.newline) and (not ascii_prompt or forms.ascii):
        at = _find_from(prompt, text, after)
        if at >= 0:
            return at, at + len(text), None
    for body in forms.json:
        if ascii_prompt and not body.isascii():
            continue
        at = _find_from(prompt, body, after)
        if at >= 0:
            return at, at + len(body), "json"
    return NOWHERE


def _find_from(prompt: str, needle: str, after: int) -> int:
    """A place needle stands: from after on, else before it (each place is in one of the two searches)."""
    at = find_text(prompt, needle, after)
    if at < 0 and after > 0:
        at = find_text(prompt, needle, 0, min(len(prompt), after + len(needle) - 1))
    return at


def _retrievals(rows: list[tuple]) -> pl.DataFrame:
    schema = {
        "request_id": pl.String,
        "day": pl.Date,
        "chunk_id": pl.String,
        "rank": pl.Int32,
        "position": pl.Int32,
        "doc_id": pl.String,
        "chunking": pl.String,
        "text": pl.String,
        "unescape": pl.String,
        "text_source": pl.String,
        "raw_start": pl.Int32,  # where the text as logged stands in prompt_raw: _raw_span
        "raw_end": pl.Int32,
        "raw_encoding": pl.String,
    }
    df = _frame(rows, schema)
    return df.with_columns(text_normalized=normalize(pl.col("text"), _unescape_of(df)))
