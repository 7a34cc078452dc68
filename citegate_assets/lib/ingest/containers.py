"""Step 1 of N: decode the log container (`prompt_encoding`) into the messages that were sent.

A prompt is returned as an ordered list of messages so that role boundaries survive: a plain-text
prompt is one message with role "text".

`decode_body` returns the full decoding (`Decoded`): the messages, each with the document block it
came from, if any, and a count of the parts that carry no text the model read as text (images,
audio, files, tool calls, reasoning, unknown part types). `decode_prompt` is the older interface: the
same messages as plain (role, text) 2-tuples.

JSON request bodies understood (`prompt_encoding = "json"`):
- OpenAI chat.completions `{"messages": [...]}`: content a string or a list of parts (`text`,
  `input_text`, `refusal` are text; `image_url`, `input_audio`, `file` are skipped); `tool` role
  messages; assistant `tool_calls` / `function_call` are skipped (tool calls are not context);
- OpenAI Responses `{"instructions"?, "input": str | [items]}`: message items (parts `input_text`,
  `output_text` are text; `input_image`, `input_file` skipped); `function_call_output` becomes a
  message with role "tool" (its output is text the model read); `function_call`, `reasoning` and
  every other item type are skipped;
- OpenAI completions `{"prompt": str | [str, ...]}`: each prompt string is a message with role "text";
- Anthropic Messages `{"system"?, "messages": [...]}`: `system` a string or text blocks; blocks
  `text`; `image` (skipped); `document` (source `text`, `content` (string or block list), `base64`
  PDF, whose pages' text pypdf extracts (lib/ingest/pdf_text.py; an unreadable one is skipped), `url` / `file` whose
  content is skipped); `search_result`; `tool_use` (skipped);
  `tool_result` (string or block list; becomes messages with role "tool"). Every `document` and
  `search_result` block becomes a message of its own, role "document", with a `DocumentBlock` (which also
  keeps the source type and, for a search result or a content document, the text of each entry of its
  `content` array: the units Anthropic's block-location citations index);
- OpenTelemetry GenAI messages `[{role, parts: [...]}]` (parts `text` {content},
  `tool_call_response` {response} are text; `tool_call`, `blob`, `uri`, `file`, `reasoning`
  skipped), either as the top-level body, under `messages`, or as the attributes
  `gen_ai.input.messages` / `gen_ai.system_instructions` (structured or as JSON strings);
- a JSON string literal: the rendered prompt.

Parts of a type this module does not know are skipped and counted, never fatal. A PromptDecodeError
is raised only for a body that is not JSON, not a string, object or list, has no field of a known
shape, or whose structure is broken (e.g. `messages` not a list, a message that is not an object);
its message names the JSON path at fault.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from citegate_assets.lib.ingest.pdf_text import PDF_MEDIA_TYPE, PdfText, pdf_from_base64

try:  # compiled at install when a C compiler is there (pyproject.toml ext-modules); literal_eval alone otherwise
    import citegate_assets.lib.ingest._literals as _literals
except ImportError:  # pragma: no cover - where no compiler built it
    _literals = None  # type: ignore[assignment]

ENCODINGS = ("text", "json", "python_repr")


class PromptDecodeError(ValueError):
    """The prompt field does not decode under its declared encoding."""


@dataclass(frozen=True)
class DocumentBlock:
    """A citable block of the request (Anthropic `document` / `search_result`).

    index: 0-based position among the blocks of the same kind in the whole body, in order (messages,
    then blocks within a message, tool results included), i.e. the `document_index` /
    `search_result_index` that Anthropic citations of this block carry.
    source: a search result's `source` string; a document's `source.url` (URL sources), else None.
    source_type: a document's `source.type` ("text", "content", "base64", "url", "file", ...); None for a
    search result.
    blocks: the units a block location (`content_block_location`, `search_result_location`) indexes: the
    text of each entry of a search result's or a content document's `content` array, in order, None for an
    entry with no text (an image); a `content` string is one block. None for other documents (a text
    document is cited by characters of the message text, which is its `source.data` exactly).
    pdf: a base64 PDF document's pages as lib/pdf_text reads them (their text joined is the message's text), or
    why they cannot be read; None for any other block.
    The three are not compared (`==` on a DocumentBlock is on the fields above), so decodings compare as before.
    """

    kind: Literal["document", "search_result"]
    index: int
    title: str | None
    source: str | None
    context: str | None
    source_type: str | None = field(default=None, compare=False)
    blocks: tuple[str | None, ...] | None = field(default=None, compare=False)
    pdf: PdfText | None = field(default=None, compare=False)


class Message(NamedTuple):
    role: str
    text: str
    block: DocumentBlock | None = None


@dataclass(frozen=True)
class Decoded:
    messages: list[Message]
    skipped: dict[str, int] = field(default_factory=dict)  # part type -> parts skipped (no text taken)


def decode_prompt(prompt: str, encoding: str) -> list[tuple[str, str]]:
    """The messages of the prompt as (role, text) pairs, in the order they were sent."""
    return [(m.role, m.text) for m in decode_body(prompt, encoding).messages]


def decode_body(prompt: str, encoding: str) -> Decoded:
    if encoding == "text":
        return Decoded([Message("text", prompt)], {})
    if encoding == "python_repr":
        return Decoded([Message("text", _decode_repr(prompt))], {})
    if encoding == "json":
        return _decode_request_body(prompt)
    raise PromptDecodeError(f"unknown prompt_encoding {encoding!r} (expected one of {', '.join(ENCODINGS)})")


_OBJECT_ADDRESS = re.compile(r" object at 0x[0-9a-fA-F]+>")


def _decode_repr(prompt: str) -> str:
    text = prompt.strip()
    if _literals is not None:  # what repr() writes, in one compiled pass (~5x literal_eval); None: literal_eval's
        value = _literals.string_literal(text)
        if value is not None:
            return value
    # literal_eval evaluates literals only, never code: safe on untrusted logs.
    try:
        value = ast.literal_eval(text)
    except Exception as exc:  # literal_eval raises ValueError, SyntaxError, TypeError, MemoryError, RecursionError…
        why = _OBJECT_ADDRESS.sub(">", str(exc))  # "<ast.Call object at 0x7f…>": the same line, the same reject row
        raise PromptDecodeError(
            f"python_repr prompt is not a Python string literal: {type(exc).__name__}: {why}"
        ) from None
    if not isinstance(value, str):
        raise PromptDecodeError(f"python_repr prompt decodes to {type(value).__name__}, not str")
    return value


def _decode_request_body(prompt: str) -> Decoded:
    try:
        body = json.loads(prompt)
    except (ValueError, RecursionError) as exc:
        raise PromptDecodeError(f"json prompt is not valid JSON: {exc}") from None
    if isinstance(body, str):  # a JSON string literal holding the rendered prompt
        return Decoded([Message("text", body)], {})
    dec = _Decoder()
    try:
        if isinstance(body, dict):
            dec.body(body)
        elif isinstance(body, list):
            if not body:
                raise PromptDecodeError("json prompt is an empty list: no messages")
            dec.items(body, "")
        else:
            raise PromptDecodeError(
                f"json prompt is {_json_type(body)}, not a request body object, a message list or a string"
            )
    except RecursionError:
        raise PromptDecodeError("json prompt is nested too deeply to decode") from None
    return Decoded(dec.out, dict(dec.skipped))


# ---------------------------------------------------------------------------------------------------

TEXT_PART_TYPES = ("text", "input_text", "output_text")
_MAX_KEY = 64


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _part_type(part: dict) -> str:
    t = part.get("type")
    if isinstance(t, str):
        return t[:_MAX_KEY]
    return "<untyped>" if t is None else f"<{_json_type(t)}>"


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


class _Decoder:
    """Accumulates messages and skip counts over one body; document indices run across the body."""

    def __init__(self) -> None:
        self.out: list[Message] = []
        self.skipped: dict[str, int] = {}
        self.block_counts = {"document": 0, "search_result": 0}

    def skip(self, kind: str, n: int = 1) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + n

    def fail(self, path: str, problem: str) -> PromptDecodeError:
        return PromptDecodeError(f"json prompt {path}: {problem}" if path else f"json prompt {problem}")

    # -- body level ----------------------------------------------------------------------------

    def body(self, body: dict) -> None:
        # Anthropic Messages API: the system prompt is a top-level field, sent before the turns.
        if "system" in body:
            self.turn(body["system"], "system", "system")
        if "messages" in body:
            turns = body["messages"]
            if not isinstance(turns, list):
                raise self.fail("messages", f"is {_json_type(turns)}, not a list")
            self.items(turns, "messages")
        elif "input" in body:  # OpenAI Responses API
            if isinstance(body.get("instructions"), str):  # the system/developer message, sent first
                self.out.append(Message("system", body["instructions"]))
            turns = body["input"]
            if isinstance(turns, str):
                self.out.append(Message("user", turns))
            elif isinstance(turns, list):
                self.items(turns, "input")
            else:
                raise self.fail("input", f"is {_json_type(turns)}, not a string or a list")
        elif "prompt" in body:  # completions API: a string or a list of strings, each one prompt
            self.completion_prompt(body["prompt"])
        elif "gen_ai.input.messages" in body or "gen_ai.system_instructions" in body:
            self.otel_attributes(body)
        else:
            raise self.fail("", "has no 'messages', 'input', 'prompt' or 'gen_ai.input.messages' field")

    def completion_prompt(self, prompt: object) -> None:
        if isinstance(prompt, str):
            self.out.append(Message("text", prompt))
            return
        if not isinstance(prompt, list):
            raise self.fail("prompt", f"is {_json_type(prompt)}, not a string or a list of strings")
        for i, p in enumerate(prompt):
            if isinstance(p, str):
                self.out.append(Message("text", p))
            elif isinstance(p, (int, list)) and not isinstance(p, bool):
                raise self.fail(f"prompt[{i}]", "is token ids, not text")
            else:
                raise self.fail(f"prompt[{i}]", f"is {_json_type(p)}, not a string")

    def otel_attributes(self, body: dict) -> None:
        for key, as_system in (("gen_ai.system_instructions", True), ("gen_ai.input.messages", False)):
            if key not in body:
                continue
            value = body[key]
            path = f"[{json.dumps(key)}]"
            if isinstance(value, str):  # recorded on spans as a JSON string
                try:
                    value = json.loads(value)
                except (ValueError, RecursionError) as exc:
                    raise self.fail(path, f"is not valid JSON: {exc}") from None
            if not isinstance(value, list):
                raise self.fail(path, f"is {_json_type(value)}, not a list")
            if as_system:  # a list of parts
                self.turn(value, "system", path)
            else:
                self.items(value, path)

    # -- messages / items ----------------------------------------------------------------------

    def items(self, items: list, path: str) -> None:
        for i, item in enumerate(items):
            self.item(item, f"{path}[{i}]")

    def item(self, item: object, path: str) -> None:
        if not isinstance(item, dict):
            raise self.fail(path, f"is {_json_type(item)}, not a message object")
        role = item.get("role")
        role = role if isinstance(role, str) else ("user" if role is None else str(role))
        kind = item.get("type")
        if "parts" in item:  # OpenTelemetry GenAI: {role, parts: [...]}
            self.turn(item["parts"], role, f"{path}.parts")
        elif "content" in item and (kind is None or kind == "message"):
            self.turn(item["content"], role, f"{path}.content")
            if role == "assistant":
                self.assistant_extras(item)
        elif kind == "function_call_output":  # Responses: the tool's output is text the model read
            self.turn(item.get("output"), "tool", f"{path}.output")
        elif isinstance(kind, str):  # function_call, reasoning, item_reference, …: no text of the prompt
            self.skip(_part_type(item))
        elif "tool_calls" in item or "function_call" in item:  # chat assistant turn with no content
            self.out.append(Message(role, ""))
            self.assistant_extras(item)
        else:
            raise self.fail(path, "has no 'content' or 'parts'")

    def assistant_extras(self, item: dict) -> None:
        calls = item.get("tool_calls")
        if isinstance(calls, list):
            self.skip("tool_call", len(calls))
        if item.get("function_call") is not None:
            self.skip("function_call")
        if item.get("audio") is not None:
            self.skip("audio")

    def turn(self, content: object, role: str, path: str) -> None:
        """One message's content; a turn always yields at least one message (possibly empty text)."""
        before = len(self.out)
        self.content(content, role, path)
        if len(self.out) == before:
            self.out.append(Message(role, ""))

    # -- content -------------------------------------------------------------------------------

    def content(self, content: object, role: str, path: str, *, in_tool_result: bool = False) -> None:
        """Append the messages of one content value: text parts of a run are joined by a blank line
        into one message of `role`; document, search_result and tool_result blocks are messages of their own."""
        if content is None:
            return
        if isinstance(content, str):
            self.out.append(Message(role, content))
            return
        if not isinstance(content, list):
            raise self.fail(path, f"is {_json_type(content)}, not a string or a list")
        run: list[str] = []

        def flush() -> None:
            if run:
                self.out.append(Message(role, "\n\n".join(run)))
                run.clear()

        for j, part in enumerate(content):
            where = f"{path}[{j}]"
            if isinstance(part, str):
                run.append(part)
                continue
            if not isinstance(part, dict):
                self.skip(f"<{_json_type(part)}>")
                continue
            kind = _part_type(part)
            if kind in ("document", "search_result"):
                flush()
                self.document(part, kind)
            elif kind == "tool_result" and not in_tool_result:
                flush()
                before = len(self.out)
                self.content(part.get("content"), "tool", f"{where}.content", in_tool_result=True)
                if len(self.out) == before:
                    self.out.append(Message("tool", ""))
            else:
                text = self.part_text(part, kind)
                if text is not None:
                    run.append(text)
        flush()

    def part_text(self, part: dict, kind: str) -> str | None:
        """The text of an inline part, or None (and counted) when it has none."""
        if kind in TEXT_PART_TYPES or kind == "<untyped>":
            if isinstance(part.get("text"), str):  # OpenAI / Anthropic {"type": "text", "text": ...}
                return part["text"]
            if isinstance(part.get("content"), str):  # OpenTelemetry {"type": "text", "content": ...}
                return part["content"]
        elif kind == "refusal" and isinstance(part.get("refusal"), str):  # an earlier assistant turn
            return part["refusal"]
        elif kind == "tool_call_response" and isinstance(part.get("response"), str):  # OpenTelemetry
            return part["response"]
        self.skip(kind)
        return None

    def document(self, block: dict, kind: str) -> None:
        index = self.block_counts[kind]
        self.block_counts[kind] += 1
        blocks: tuple[str | None, ...] | None = None
        src_type: str | None = None
        pdf: PdfText | None = None
        text = ""
        if kind == "search_result":
            source = _opt_str(block.get("source"))
            blocks = self.content_blocks(block.get("content"))
            context = None
        else:
            src = block.get("source")
            src = src if isinstance(src, dict) else {}
            src_type = src.get("type") if isinstance(src.get("type"), str) else None
            source = _opt_str(src.get("url"))
            if src_type == "text" and isinstance(src.get("data"), str):
                text = src["data"]
            elif src_type == "content":
                blocks = self.content_blocks(src.get("content"))
            elif src_type == "base64" and src.get("media_type") == PDF_MEDIA_TYPE and isinstance(src.get("data"), str):
                pdf = pdf_from_base64(src["data"])  # its pages' text is what the model read of it
                if pdf.pages is None:
                    self.skip("document:base64")
                text = pdf.text
            else:  # url, file, or an unknown source: nothing readable as text here
                self.skip(f"document:{src_type[:_MAX_KEY] if src_type is not None else _part_type(src)}")
            context = _opt_str(block.get("context"))
        if blocks is not None:
            # the blocks' texts joined by a blank line (a block location's cited text is their plain concatenation)
            text = "\n\n".join(b for b in blocks if b is not None)
        meta = DocumentBlock(
            kind,  # type: ignore[arg-type]
            index,
            _opt_str(block.get("title")),
            source,
            context,
            source_type=src_type,
            blocks=blocks,
            pdf=pdf,
        )
        self.out.append(Message("document", text, meta))

    def content_blocks(self, content: object) -> tuple[str | None, ...]:
        """Each entry of a block list inside a document or search result: its text, or None (counted as
        skipped) for an entry with none. A string is one block; no list at all is no block."""
        if isinstance(content, str):
            return (content,)
        if not isinstance(content, list):
            if content is not None:
                self.skip(f"<{_json_type(content)}>")
            return ()
        out: list[str | None] = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                out.append(self.part_text(part, _part_type(part)))
            else:
                self.skip(f"<{_json_type(part)}>")
                out.append(None)
        return tuple(out)
