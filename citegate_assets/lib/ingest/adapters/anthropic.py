"""Anthropic exchanges: one Messages API call per line, as the app logged it, turned into a
citegate-log/1 record; provider-native citations are verified against the request as sent, never trusted.

The line (one JSON object; `detect` needs `request` and `response`, and a `response` that is a Message):

    {"request": {...} | "<the body as sent>",   the Messages request body exactly as sent: an object, or the
                                                 raw body text (a string holding a JSON object), kept byte for byte
     "response": {...},                          the response body: a Message (`"type": "message"`)
     "logged_at": "2026-11-02T09:14:03.120Z",    when the call was made (RFC 3339 with an offset)
     "surface": "help-center",                   optional: the product surface (else [adapters].default_surface)
     "retrieved": [{chunk_id, text, rank?, doc_id?, chunking?}]}
                                                 optional: what retrieval returned before the app built the
                                                 request, as citegate-log/1 logs it (see `retrieved` below)

The record:
- `request_id` = the response `id`; `answer_model` = the response `model`; `answer` = its text blocks joined;
- `prompt` = the request body: the logged string itself, or the logged object re-serialized
  (`json.dumps`, keys in logged order, `ensure_ascii=False`), `prompt_encoding` "json". It is the body as sent,
  not rebuilt from messages, so the record carries no `prompt_reconstructed`;
- `retrieved` = the line's `retrieved` when the app logged it (then a document the app cut before sending is
  visible as `span_truncated`, one it left out as `dropped_before_prompt`); else the citable blocks of the
  request in the order sent, `document` and `search_result` alike, rank = that order (1-based): a search
  result's text is its text blocks, a document's its `source.data` (text source) or its text blocks (content
  source), a base64 PDF's the text of its pages (lib/pdf_text). With neither (no `retrieved` logged, no citable block)
  the call is rejected (`retrieval_not_paired`), never given an empty retrieval, as in every trace format. A
  document whose source is a URL, a Files API file or a PDF that cannot be read has no text citegate can read: it
  is left out of `retrieved` (its rank is skipped), and a citation into it is unverifiable (below);
- chunk id of a block: a search result's `source`; a document's `context` when that is a JSON object holding
  the key [adapters].chunk_id_key (where apps put structured metadata), else its `title`, else
  `doc{document_index}`. An id two blocks of the call share is made unique with the block's kind and index
  (`kb-1@search_result2`, `kb-1@doc0`), never dropped.

Citations. When any text block of the response carries native `citations`, each one is a citation:
chunk = the cited document or search result (by `document_index` / `search_result_index`, which count the
two kinds of block separately, across messages and tool results, as lib/containers numbers them), span =
`cited_text`, claim = the sentence(s) of the answer around the text block that carries it (a cited text
block is a fragment of a sentence). The location is checked in the body as logged, and
`location_mismatch` (null when it holds) says why not:
- `char_location`: `source.data[start_char_index:end_char_index]` (0-based code points, end exclusive) is the
  cited text;
- `content_block_location` / `search_result_location`: the text blocks `content[start:end]` (0-based, end
  exclusive) joined together are the cited text; only whitespace between two blocks may differ (the API
  joins them with nothing, the decoded prompt with a blank line). A verified multi-block span is written with
  the blank lines the decoded prompt has, so the gate finds it. A search result location's `source` must
  also be that result's `source`;
- `page_location`: the cited text is on pages `start_page_number` to `end_page_number` (1-based, end exclusive)
  of the PDF's text as lib/pdf_text reads it (pypdf), whitespace and ligatures aside; the span is then those
  pages' own text, as the decoded prompt holds it. A PDF that cannot be read (encrypted, broken, over a bound) is
  `unverifiable: ...` with why, which the gate reports as `location_mismatch` (verdict unverifiable), never as a
  pass;
- `web_search_result_location` (a server-side web search result, not in the request) and any type this
  module does not know: `unverifiable: ...` likewise; chunk = the result's `url` / `cited:<type>`.
With no native citation in the response, the citations are the list at [adapters].citations_path in the
answer's own JSON; an answer with no such list is passed as the raw `citations` string, so ingest puts it in
`answer_rejects` as for any citegate-log/1 line.

Line rejects: `empty_line`, `invalid_utf8`, `invalid_json`, `not_of_format` (no `request`/`response`, or a
response that is no Message: an error body, a citation with no `cited_text`, ...; when the response names its
`id`, the reject is that call's), `prompt_undecodable` (a request body lib/containers cannot read),
`retrieval_not_paired` (a call's: no `retrieved` logged and no citable block in the request).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from citegate_assets.lib.ingest.adapters.base import (
    EMPTY_LINE,
    INVALID_JSON,
    INVALID_UTF8,
    NOT_OF_FORMAT,
    PROMPT_UNDECODABLE,
    RETRIEVAL_NOT_PAIRED,
    AdapterSettings,
    Call,
    LineReject,
)
from citegate_assets.lib.ingest.containers import DocumentBlock, Message, PromptDecodeError, decode_body
from citegate_assets.lib.ingest.pdf_text import PAGE_SEPARATOR, find_loose

BOM = b"\xef\xbb\xbf"
UNVERIFIABLE = "unverifiable: "  # the prefix of a location_mismatch that says the location could not be read
_QUOTE = 60  # characters of a text quoted in a mismatch detail
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_READABLE = ("text", "content")  # document sources whose text the request carries


class NotOfFormat(ValueError):
    """The line is JSON, but not an Anthropic exchange; the message says where."""


@dataclass(frozen=True)
class CitableBlock:
    """A citable block of the request, as decoded."""

    meta: DocumentBlock
    text: str
    chunk_id: str
    rank: int  # 1-based position among the citable blocks, in the order sent

    @property
    def readable(self) -> bool:
        pdf = self.meta.pdf
        return self.meta.kind == "search_result" or self.meta.source_type in _READABLE or bool(pdf and pdf.pages)


class AnthropicAdapter:
    name = "anthropic"

    def detect(self, first_line: bytes) -> bool:
        try:
            obj = json.loads(first_line)
        except (ValueError, RecursionError):
            return False
        return (
            isinstance(obj, dict)
            and isinstance(obj.get("request"), (dict, str))
            and isinstance(obj.get("response"), dict)
            and obj["response"].get("type") == "message"
            and "prompt" not in obj  # a citegate-log/1 line never holds `request`/`response`; be sure anyway
        )

    def convert(self, lines: Iterable[tuple[int, bytes]], settings: AdapterSettings) -> Iterator[Call | LineReject]:
        for line_no, raw in lines:
            yield convert_line(line_no, raw, settings)


ADAPTER = AnthropicAdapter()


def convert_line(line_no: int, raw: bytes, settings: AdapterSettings) -> Call | LineReject:
    if line_no == 1 and raw.startswith(BOM):
        raw = raw[len(BOM) :]  # an encoding artifact, not content (as lib/records treats it)
    if not raw.strip():
        return LineReject(line_no, EMPTY_LINE, "blank line")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return LineReject(line_no, INVALID_UTF8, f"not UTF-8 at byte {exc.start}")
    except (ValueError, RecursionError) as exc:
        return LineReject(line_no, INVALID_JSON, str(exc)[:200])
    if not isinstance(obj, dict):
        return LineReject(line_no, NOT_OF_FORMAT, f"line holds a JSON {_kind(obj)}, not an exchange object")
    response = obj.get("response")
    request_id = response.get("id") if isinstance(response, dict) and isinstance(response.get("id"), str) else None
    try:
        record = _record(obj, settings)
    except NotOfFormat as exc:
        if request_id is None:
            return LineReject(line_no, NOT_OF_FORMAT, str(exc))
        return Call(line_no, request_id, None, NOT_OF_FORMAT, str(exc))
    except PromptDecodeError as exc:
        return Call(line_no, request_id, None, PROMPT_UNDECODABLE, f"request: {exc}")
    except _NotPaired as exc:
        return Call(line_no, request_id, None, RETRIEVAL_NOT_PAIRED, str(exc))
    except Exception as exc:  # noqa: BLE001 — a shape this adapter did not expect: this line's reject only
        detail = f"line {line_no}: cannot be read: {type(exc).__name__}: {exc}"[:300]
        if request_id is None:
            return LineReject(line_no, NOT_OF_FORMAT, detail)
        return Call(line_no, request_id, None, NOT_OF_FORMAT, detail)
    return Call(line_no, record["request_id"], record)


class _NotPaired(Exception):
    """No retrieval logged and no citable block in the request."""


def _record(obj: dict, settings: AdapterSettings) -> dict:
    if "request" not in obj or "response" not in obj:
        raise NotOfFormat("no 'request' and 'response' fields: not an Anthropic exchange")
    request, response = obj["request"], obj["response"]
    if isinstance(request, str):
        prompt = request
        try:
            body = json.loads(request)
        except (ValueError, RecursionError) as exc:
            raise PromptDecodeError(f"json prompt is not valid JSON: {str(exc)[:200]}") from None
        if not isinstance(body, dict):
            raise NotOfFormat(f"'request' text holds a JSON {_kind(body)}, not a request body object")
    elif isinstance(request, dict):
        prompt = json.dumps(request, ensure_ascii=False)
    else:
        raise NotOfFormat(f"'request' is a JSON {_kind(request)}, not the request body (an object or its text)")
    if not isinstance(response, dict) or response.get("type") != "message":
        what = response.get("type") if isinstance(response, dict) else _kind(response)
        raise NotOfFormat(f"'response' is not a Message (type {what!r}): no answer")
    for key in ("id", "model"):
        if not isinstance(response.get(key), str):
            raise NotOfFormat(f"response.{key} is missing or not a string")
    content = response.get("content")
    if not isinstance(content, list):
        raise NotOfFormat("response.content is missing or not a list")

    decoded = decode_body(prompt, "json")
    blocks = citable_blocks(decoded.messages, settings)
    answer, texts = answer_texts(content)
    citations: list[dict] | str
    if any(block.get("citations") for _, _, block in texts):
        citations = checked_citations(texts, answer, blocks)
    else:
        citations = _from_answer_json(answer, settings.citations_path)
    if "retrieved" in obj and obj["retrieved"] is not None:
        retrieved = obj["retrieved"]  # the app's own log; ingest validates it like any citegate-log/1 line
    elif blocks:
        retrieved = [{"chunk_id": b.chunk_id, "rank": b.rank, "text": b.text} for b in blocks if b.readable]
    else:
        raise _NotPaired("the exchange logs no 'retrieved' and its request holds no document or search result block")
    surface = obj.get("surface")
    return {
        "request_id": response["id"],
        "logged_at": obj.get("logged_at"),
        "surface": surface if isinstance(surface, str) and surface.strip() else settings.default_surface,
        "answer_model": response["model"],
        "prompt": prompt,
        "prompt_encoding": "json",
        "retrieved": retrieved,
        "answer": answer,
        "citations": citations,
    }


# --- the request's citable blocks -------------------------------------------------------------------


def citable_blocks(messages: list[Message], settings: AdapterSettings) -> list[CitableBlock]:
    """The request's citable blocks (documents, search results) in the order sent, each with its chunk id and rank."""
    metas = [(m.block, m.text) for m in messages if m.block is not None]
    ids = [_block_id(meta, settings) for meta, _ in metas]
    shared = {i for i, n in Counter(ids).items() if n > 1}
    return [
        CitableBlock(meta, text, f"{cid}@{_ref(meta)}" if cid in shared else cid, rank)
        for rank, ((meta, text), cid) in enumerate(zip(metas, ids), 1)
    ]


def _ref(meta: DocumentBlock) -> str:
    return f"doc{meta.index}" if meta.kind == "document" else f"search_result{meta.index}"


def _block_id(meta: DocumentBlock, settings: AdapterSettings) -> str:
    if meta.kind == "search_result" and meta.source and meta.source.strip():
        return meta.source.strip()
    if meta.kind == "document":
        from_context = _context_id(meta.context, settings.chunk_id_key)
        if from_context:
            return from_context
        if meta.title and meta.title.strip():
            return meta.title.strip()
    return _ref(meta)


def _context_id(context: str | None, key: str) -> str | None:
    if not context or not context.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(context)
    except (ValueError, RecursionError):
        return None
    found = value.get(key) if isinstance(value, dict) else None
    return found.strip() if isinstance(found, str) and found.strip() else None


def _by_kind(blocks: list[CitableBlock], kind: str) -> dict[int, CitableBlock]:
    return {b.meta.index: b for b in blocks if b.meta.kind == kind}


# --- the answer -------------------------------------------------------------------------------------


def answer_texts(content: list) -> tuple[str, list[tuple[int, str, dict]]]:
    """The answer text (the text blocks joined as they stand) and each text block: its offset in the answer,
    its JSON path, the block."""
    texts: list[tuple[int, str, dict]] = []
    pos = 0
    parts = []
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            raise NotOfFormat(f"response.content[{i}] is a JSON {_kind(block)}, not a content block")
        if block.get("type") != "text":
            continue  # tool_use, thinking, server tool blocks: no answer text
        if not isinstance(block.get("text"), str):
            raise NotOfFormat(f"response.content[{i}].text is missing or not a string")
        cits = block.get("citations")
        if cits is not None and not isinstance(cits, list):
            raise NotOfFormat(f"response.content[{i}].citations is not a list")
        texts.append((pos, f"response.content[{i}]", block))
        parts.append(block["text"])
        pos += len(block["text"])
    return "".join(parts), texts


def _claim(answer: str, start: int, end: int) -> str:
    """The sentence(s) of the answer around [start, end): a cited text block is a fragment of its sentence."""
    lo, hi = 0, len(answer)
    for m in _SENTENCE_END.finditer(answer):
        if m.end() <= start:
            lo = m.end()
        elif m.start() >= end:
            hi = m.start()
            break
    return answer[lo:hi].strip()


def _from_answer_json(answer: str, path: str) -> list | str:
    """The list at `path` (dotted) in the answer's JSON; else the answer itself, which ingest rejects as today."""
    try:
        value = json.loads(answer)
    except (ValueError, RecursionError):
        return answer
    for key in path.split(".") if path else []:
        if not isinstance(value, dict) or key not in value:
            return answer
        value = value[key]
    return value if isinstance(value, list) else answer


# --- native citations -------------------------------------------------------------------------------


def checked_citations(texts: list[tuple[int, str, dict]], answer: str, blocks: list[CitableBlock]) -> list[dict]:
    """The native citations of the answer's text blocks as {chunk_id, span, claim}, each location checked against the
    blocks as sent (`location_mismatch` says why one is not where the API said)."""
    documents, results = _by_kind(blocks, "document"), _by_kind(blocks, "search_result")
    out = []
    for offset, path, block in texts:
        claim = _claim(answer, offset, offset + len(block["text"]))
        for j, cit in enumerate(block.get("citations") or []):
            where = f"{path}.citations[{j}]"
            if not isinstance(cit, dict):
                raise NotOfFormat(f"{where} is a JSON {_kind(cit)}, not a citation")
            if not isinstance(cit.get("cited_text"), str):
                raise NotOfFormat(f"{where}.cited_text is missing or not a string")
            chunk_id, span, mismatch = _check(cit, where, documents, results)
            out.append(
                {"chunk_id": chunk_id, "span": span, "claim": claim, "location_mismatch": mismatch, "origin": "native"}
            )
    return out


def _check(
    cit: dict, where: str, documents: dict[int, CitableBlock], results: dict[int, CitableBlock]
) -> tuple[str, str, str | None]:
    """(chunk id, span, location_mismatch) of one native citation."""
    kind, cited = cit.get("type"), cit["cited_text"]
    if kind in ("char_location", "page_location", "content_block_location"):
        index = _int(cit, "document_index", where)
        doc = documents.get(index)
        if doc is None:
            title = cit.get("document_title")
            chunk = title.strip() if isinstance(title, str) and title.strip() else f"doc{index}"
            return chunk, cited, f"document_index {index}: the request as logged has {len(documents)} documents"
        if kind == "char_location":
            return doc.chunk_id, cited, _check_chars(doc, cit, cited, where)
        if kind == "page_location":
            first, last = _int(cit, "start_page_number", where), _int(cit, "end_page_number", where)
            if doc.meta.source_type in _READABLE:
                return (
                    doc.chunk_id,
                    cited,
                    f"page_location into document {index}, whose source is {doc.meta.source_type!r}, not a PDF",
                )
            span, mismatch = _check_pages(doc, first, last, cited)
            return doc.chunk_id, span, mismatch
        span, mismatch = _check_blocks(doc, cit, cited, where, f"document {index}")
        return doc.chunk_id, span, mismatch
    if kind == "search_result_location":
        index = _int(cit, "search_result_index", where)
        result = results.get(index)
        named = cit.get("source") if isinstance(cit.get("source"), str) else None
        if result is None:
            chunk = named.strip() if named and named.strip() else f"search_result{index}"
            return chunk, cited, f"search_result_index {index}: the request as logged has {len(results)} search results"
        if named is not None and named != result.meta.source:
            return (
                result.chunk_id,
                cited,
                (
                    f"search_result_index {index} is source {_q(result.meta.source or '')}; "
                    f"the citation names source {_q(named)}"
                ),
            )
        span, mismatch = _check_blocks(result, cit, cited, where, f"search result {index}")
        return result.chunk_id, span, mismatch
    if kind == "web_search_result_location":
        url = cit.get("url")
        chunk = url if isinstance(url, str) and url.strip() else "cited:web_search_result_location"
        return chunk, cited, f"{UNVERIFIABLE}a server-side web search result: its text is not in the request"
    name = kind if isinstance(kind, str) else _kind(kind)
    return f"cited:{name[:40]}", cited, f"{UNVERIFIABLE}citation type {name[:40]!r} is not one citegate knows"


def _check_pages(doc: CitableBlock, first: int, last: int, cited: str) -> tuple[str, str | None]:
    """(span, location_mismatch) of a page_location: the cited text must be on pages [first, last) (1-based, end
    exclusive) of the PDF as pypdf reads it, whitespace and ligatures aside; the span is then the pages' own text
    there, as the prompt holds it."""
    index = doc.meta.index
    last = first + 1 if last == first else last  # one page named twice (an inclusive end) is that page
    pages = f"page {first}" if last - first <= 1 else f"pages {first}-{last - 1}"
    pdf = doc.meta.pdf
    if pdf is None or pdf.pages is None:
        what = doc.meta.source_type or "unknown"
        why = f"a PDF citegate cannot read: {pdf.why}" if pdf is not None and pdf.why else ""
        return cited, f"{UNVERIFIABLE}{pages} of document {index}, " + (
            why or f"a {what!r} source whose text citegate cannot read"
        )
    count = len(pdf.pages)
    if not 1 <= first < last <= count + 1:
        return cited, f"{pages} of document {index}: outside its {count} pages as logged"
    text, starts = pdf.text, pdf.page_starts()
    end = starts[last - 1] - len(PAGE_SEPARATOR) if last - 1 < count else len(text)
    found = find_loose(text, cited, starts[first - 1], end)
    if found is not None:
        return text[found[0] : found[1]], None
    elsewhere = find_loose(text, cited)
    if elsewhere is None:
        return cited, f"{pages} of document {index}: expected {_q(cited)}, which is not in the PDF's text"
    page = sum(1 for at in starts if at <= elsewhere[0])
    return cited, f"{pages} of document {index}: expected {_q(cited)}, which is on page {page}"


def _check_chars(doc: CitableBlock, cit: dict, cited: str, where: str) -> str | None:
    start, end = _int(cit, "start_char_index", where), _int(cit, "end_char_index", where)
    label = f"document {doc.meta.index}"
    if doc.meta.source_type != "text":
        return f"char_location into {label}, whose source is {doc.meta.source_type!r}, not text"
    text = doc.text
    if not 0 <= start <= end <= len(text):
        return (
            f"{label} chars {start}-{end}: outside the document as logged ({len(text)} chars){_elsewhere(text, cited)}"
        )
    there = text[start:end]
    if there == cited:
        return None
    return f"{label} chars {start}-{end}: expected {_q(cited)}, found {_q(there)}{_elsewhere(text, cited)}"


def _check_blocks(block: CitableBlock, cit: dict, cited: str, where: str, label: str) -> tuple[str, str | None]:
    start, end = _int(cit, "start_block_index", where), _int(cit, "end_block_index", where)
    units = block.meta.blocks
    if units is None:
        return cited, f"block location into {label}, whose source is {block.meta.source_type!r}, not content blocks"
    if not 0 <= start < end <= len(units):
        return cited, f"{label} blocks {start}-{end}: outside the {len(units)} blocks as logged"
    cut = units[start:end]
    if any(u is None for u in cut):
        return cited, f"{label} blocks {start}-{end}: a cited block holds no text (an image)"
    texts = [u for u in cut if u is not None]
    if _joins(texts, cited):
        return "\n\n".join(texts), None
    return cited, f"{label} blocks {start}-{end}: expected {_q(cited)}, found {_q(''.join(texts))}"


def _joins(texts: list[str], cited: str) -> bool:
    """The cited text is the blocks' texts in order, with nothing but whitespace (or nothing) between two."""
    pattern = r"\s*".join(re.escape(t) for t in texts)
    return re.fullmatch(pattern, cited) is not None


def _elsewhere(text: str, cited: str) -> str:
    at = text.find(cited) if cited else -1
    return f"; the cited text is at chars {at}-{at + len(cited)}" if at >= 0 else "; the cited text is not in it"


def _int(cit: dict, key: str, where: str) -> int:
    value = cit.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotOfFormat(f"{where}.{key} is missing or not an integer")
    return value


def _q(text: str) -> str:
    return json.dumps(text if len(text) <= _QUOTE else text[: _QUOTE - 1] + "…", ensure_ascii=False)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )
