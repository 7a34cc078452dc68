"""The GenAI content of an OTLP span: its messages from attributes or events (refusing redacted content), its surface,
citations and retrieved documents."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from citegate_assets.lib.ingest.adapters.base import (
    CONTENT_NOT_CAPTURED,
    CONTENT_REDACTED,
    CONTENT_TRUNCATED,
    NOT_OF_FORMAT,
    AdapterSettings,
)
from citegate_assets.lib.ingest.adapters.otlp_spans import (
    CHOICE_EVENT,
    CONTENT_KEYS,
    INPUT_MESSAGES,
    MESSAGE_EVENTS,
    OUTPUT_MESSAGES,
    REDACTED_PLACEHOLDER,
    REDACTION_SUMMARY_KEYS,
    RETRIEVAL_DOCUMENTS,
    SYSTEM_INSTRUCTIONS,
    _Broken,
    _Event,
    _get,
    _SpanRow,
    _Unusable,
)
from citegate_assets.lib.ingest.adapters.traces import (
    ChunkIdentity,
    surface_key_of,
)


def _check_redaction(attributes: dict[str, Any], where: str, keys: frozenset[str] = CONTENT_KEYS) -> None:
    for summary in REDACTION_SUMMARY_KEYS:
        value = _get(attributes, summary, where)  # unreadable: whether content was masked cannot be told
        if isinstance(value, str):
            hit = sorted({k.strip() for k in value.split(",")} & keys)
            if hit:
                raise _Unusable(
                    CONTENT_REDACTED,
                    f"{where}: the collector's redaction processor changed {', '.join(hit)} ({summary})",
                )


def _parse_content(value: Any, key: str, where: str) -> Any:
    """A content attribute: structured (an arrayValue) or a JSON string; a JSON string cut short is truncated."""
    if isinstance(value, _Broken):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {key} cannot be read ({value.why})")
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as exc:
        # the first error is the end of the text (an unterminated string is one too): all before it was valid JSON
        if isinstance(exc, json.JSONDecodeError) and (
            exc.msg.startswith("Unterminated string") or exc.pos >= len(value.rstrip())
        ):
            raise _Unusable(
                CONTENT_TRUNCATED,
                f"{where}: {key} ends mid-JSON after {len(value)} characters (cut by an attribute length limit)",
            ) from None
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {key} is not JSON: {str(exc)[:120]}") from None


def _from_attributes(attrs: dict[str, Any], where: str) -> tuple[list[dict], str | None]:
    messages: list[dict] = []
    system = _parse_content(attrs.get(SYSTEM_INSTRUCTIONS), SYSTEM_INSTRUCTIONS, where)
    if system is not None:
        if not isinstance(system, list):
            raise _Unusable(NOT_OF_FORMAT, f"{where}: {SYSTEM_INSTRUCTIONS} is not a list of parts")
        messages.append({"role": "system", "content": _parts_content(system, f"{where}: {SYSTEM_INSTRUCTIONS}")})
    inputs = _parse_content(attrs.get(INPUT_MESSAGES), INPUT_MESSAGES, where)
    for i, m in enumerate(_message_list(inputs, INPUT_MESSAGES, where)):
        messages.append({"role": m["role"], "content": _parts_content(m["parts"], f"{where}: {INPUT_MESSAGES}[{i}]")})
    outputs = _parse_content(attrs.get(OUTPUT_MESSAGES), OUTPUT_MESSAGES, where)
    answer = None
    for i, m in enumerate(_message_list(outputs, OUTPUT_MESSAGES, where)):
        content = _parts_content(m["parts"], f"{where}: {OUTPUT_MESSAGES}[{i}]")
        answer = content if isinstance(content, str) else "".join(p["text"] for p in content)
        break  # the first choice is the answer
    return messages, answer


def _message_list(value: Any, key: str, where: str) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {key} is not a list of messages")
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("parts"), list):
            raise _Unusable(NOT_OF_FORMAT, f"{where}: {key}[{i}] is not a {{role, parts}} message")
    return value


def _parts_content(parts: list, where: str) -> str | list[dict]:
    """GenAI parts → OpenAI chat content: one text part → a string, several → text parts; text is `text`
    parts' `content` and a `tool_call_response`'s `response`; tool calls, blobs, uris, files are left out."""
    texts: list[str] = []
    for i, p in enumerate(parts):
        if not isinstance(p, dict):
            raise _Unusable(NOT_OF_FORMAT, f"{where}.parts[{i}] is not an object")
        if p.get("type") == "text" and isinstance(p.get("content"), str):
            texts.append(p["content"])
        elif p.get("type") == "tool_call_response" and p.get("response") is not None:
            r = p["response"]
            texts.append(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False))
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": t} for t in texts]


def _from_events(events: list[_Event], where: str) -> tuple[list[dict], str | None]:
    messages: list[dict] = []
    answer = None
    for ev in events:
        body = ev.body if isinstance(ev.body, dict) else {}
        if ev.name in MESSAGE_EVENTS:
            content = body.get("content")
            if content is None:
                continue  # capture off: the event carries the role only
            if not isinstance(content, (str, list)):
                raise _Unusable(NOT_OF_FORMAT, f"{where}: {ev.name} event content is not text or a part list")
            messages.append({"role": MESSAGE_EVENTS[ev.name], "content": content})
        elif ev.name == CHOICE_EVENT and answer is None and body.get("index", 0) == 0:
            message = body.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                answer = content
    return messages, answer


def _message_texts(m: dict) -> list[str]:
    c = m.get("content")
    if isinstance(c, str):
        return [c] if c else []
    if isinstance(c, list):
        return [p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"]]
    return []


def _surface(row: _SpanRow, ancestors: Iterable[_SpanRow], settings: AdapterSettings) -> str:
    """The span's own `surface_key` attribute (or `<namespace>.surface_key`), else the nearest ancestor span's that
    has one (an app sets it on the request's root span), else the resource's, else a service.name of the app's,
    else default_surface."""
    where = f"span {row.span.span_id}"
    for span in (row, *ancestors):
        key = surface_key_of(span.attributes, settings.surface_key)
        value = _get(span.attributes, key, f"span {span.span.span_id}") if key else None
        if isinstance(value, str) and value.strip():
            return value
    if isinstance(row.resource, _Broken):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: its resource cannot be read ({row.resource.why}): no surface")
    key = surface_key_of(row.resource, settings.surface_key)
    value = _get(row.resource, key, where) if key else None
    if isinstance(value, str) and value.strip():
        return value
    service = _get(row.resource, "service.name", where) if isinstance(row.resource, dict) else None
    if isinstance(service, str) and service.strip() and not service.startswith("unknown_service"):
        return service
    return settings.default_surface


def _rfc3339(nanos: int) -> str:
    seconds, rest = divmod(nanos, 1_000_000_000)
    t = datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=rest // 1000)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _citations(answer: str | None, path: str) -> Any:
    if answer is None:
        return ""
    try:
        value: Any = json.loads(answer)
    except (ValueError, RecursionError):
        return answer
    for step in path.split(".") if path else []:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return answer
    return value


def _documents(r: _SpanRow, settings: AdapterSettings) -> list[tuple[ChunkIdentity, str | None]]:
    where = f"retrieval span {r.span.span_id}"
    _check_redaction(r.attributes, where, frozenset({RETRIEVAL_DOCUMENTS}))
    if RETRIEVAL_DOCUMENTS not in r.attributes:
        raise _Unusable(
            CONTENT_NOT_CAPTURED, f"{where} has no {RETRIEVAL_DOCUMENTS}: document capture was off (it is opt-in)"
        )
    docs = _parse_content(r.attributes[RETRIEVAL_DOCUMENTS], RETRIEVAL_DOCUMENTS, where)
    if not isinstance(docs, list):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {RETRIEVAL_DOCUMENTS} is not a list")
    out: list[tuple[ChunkIdentity, str | None]] = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise _Unusable(NOT_OF_FORMAT, f"{where}: {RETRIEVAL_DOCUMENTS}[{i}] is not an object")
        metadata = d.get("metadata")
        identity = ChunkIdentity.of(
            d.get("id"), metadata.get(settings.chunk_id_key) if isinstance(metadata, dict) else None
        )
        if identity is None:
            raise _Unusable(
                NOT_OF_FORMAT,
                f"{where}: {RETRIEVAL_DOCUMENTS}[{i}] has no string id and no metadata.{settings.chunk_id_key}",
            )
        text = d.get("content") if isinstance(d.get("content"), str) else d.get("text")
        if isinstance(text, str):
            if text.strip() == REDACTED_PLACEHOLDER:
                raise _Unusable(
                    CONTENT_REDACTED, f"{where}: document {identity.resolve('')[0]!r} text is {REDACTED_PLACEHOLDER}"
                )
            out.append((identity, text))
        else:
            out.append((identity, None))
    return out


def _texts_from_prompt(texts: list[str], wanted: list[str], all_ids: list[str]) -> dict[str, tuple[str | None, str]]:
    """Each wanted chunk's text as the prompt shows it, found by its id: the id must open exactly one line of the
    prompt's messages as `[ID]` or `ID:`; the text runs from there to the first blank line, the next line opened
    that way by another retrieved id, or the end of that message, whichever comes first. (None, why) otherwise.
    The text is what the prompt holds, so a chunk the app cut is seen cut (span_truncated cannot show).
    One pass over the messages for all ids (a longer id wins where two could open the same line)."""
    ids = sorted(set(all_ids), key=lambda c: (-len(c), c))
    alternatives = "|".join(re.escape(c) for c in ids)
    opener = re.compile(
        r"^[ \t]*(?:\[(?P<b>" + alternatives + r")\]|(?P<c>" + alternatives + r"):)[ \t]*", re.MULTILINE
    )
    hits: dict[str, list[tuple[int, int]]] = {}  # id -> (text index, end of its opener)
    openers: list[list[tuple[int, str]]] = []  # per text: (start of an opener line, its id)
    for t, text in enumerate(texts):
        found = []
        for m in opener.finditer(text):
            chunk_id = m.group("b") if m.group("b") is not None else m.group("c")
            found.append((m.start(), chunk_id))
            hits.setdefault(chunk_id, []).append((t, m.end()))
        openers.append(found)
    out: dict[str, tuple[str | None, str]] = {}
    for chunk_id in wanted:
        places = hits.get(chunk_id, [])
        if len(places) != 1:
            out[chunk_id] = (
                None,
                "no text in the trace, and its id opens no line of the prompt"
                if not places
                else f"no text in the trace, and its id opens {len(places)} lines of the prompt",
            )
            continue
        t, begin = places[0]
        text = texts[t]
        end = len(text)
        blank = re.compile(r"\n[ \t]*\n").search(text, begin)
        if blank:
            end = blank.start()
        for at, other in openers[t]:
            if at >= begin and other != chunk_id:
                end = min(end, at)
                break
        found_text = text[begin:end].strip()
        out[chunk_id] = (
            (found_text, "prompt")
            if found_text
            else (None, "no text in the trace, and its section in the prompt is empty")
        )
    return out
