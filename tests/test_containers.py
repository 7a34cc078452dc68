"""decode_body / decode_prompt on every real request-body shape (classes 7 and 8).

Bodies are written as the SDK docs and types show them (openai 3.57 `types/chat`, `types/responses`,
`completion_create_params`; anthropic `types/*_block_param.py`; OpenTelemetry GenAI `parts` messages).
"""

from __future__ import annotations

import ast
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegate_assets.lib.ingest.containers import (
    Decoded,
    DocumentBlock,
    Message,
    PromptDecodeError,
    decode_body,
    decode_prompt,
)

CHUNK_A = "Refunds to the original card are issued within 5 business days of approval."
CHUNK_B = "Store credit is applied immediately."
QUESTION = "How long do card refunds take?"
# base64 payloads: none of them may ever reach the prompt text
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PDF_B64 = "JVBERi0xLjQKJcOkw7zDtsOfCjIgMCBvYmoKPDwvTGVuZ3RoIDMgMCBSL0ZpbHRlci9GbGF0ZURlY29kZT4+CnN0cmVhbQo="
WAV_B64 = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="


def body(obj: object) -> str:
    return json.dumps(obj)


def decode(obj: object) -> Decoded:
    return decode_body(body(obj), "json")


def assert_no_base64(decoded: Decoded) -> None:
    for m in decoded.messages:
        for blob in (PNG_B64, PDF_B64, WAV_B64, PNG_B64[:40], PDF_B64[:40]):
            assert blob not in m.text


# --- OpenAI chat.completions --------------------------------------------------------------------


def test_chat_completions_parts_tool_calls_and_tool_messages():
    d = decode(
        {
            "model": "gpt-4.1",
            "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "Answer from the sources."}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": f"Sources:\n[kb-112#3] {CHUNK_A}"},
                        {
                            "type": "image_url",
                            "image_url": {"url": f"data:image/png;base64,{PNG_B64}", "detail": "low"},
                        },
                        {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}},
                        {
                            "type": "file",
                            "file": {"filename": "policy.pdf", "file_data": f"data:application/pdf;base64,{PDF_B64}"},
                        },
                        {"type": "text", "text": QUESTION},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "search_kb", "arguments": '{"q": "refund"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": f"[kb-087#1] {CHUNK_B}"},
                {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "no more results"}]},
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't share that."}]},
            ],
        }
    )
    assert d.messages == [
        Message("developer", "Answer from the sources."),
        Message("user", f"Sources:\n[kb-112#3] {CHUNK_A}\n\n{QUESTION}"),
        Message("assistant", ""),
        Message("tool", f"[kb-087#1] {CHUNK_B}"),
        Message("tool", "no more results"),
        Message("assistant", "I can't share that."),
    ]
    assert d.skipped == {"image_url": 1, "input_audio": 1, "file": 1, "tool_call": 1}
    assert_no_base64(d)


def test_chat_completions_string_content_unchanged():
    prompt = body(
        {
            "model": "gpt",
            "messages": [{"role": "system", "content": f"Context:\n{CHUNK_A}"}, {"role": "user", "content": QUESTION}],
        }
    )
    assert decode_prompt(prompt, "json") == [("system", f"Context:\n{CHUNK_A}"), ("user", QUESTION)]
    assert decode_body(prompt, "json").skipped == {}


def test_decode_prompt_returns_plain_two_tuples():
    prompt = body(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": CHUNK_A}}
                    ],
                }
            ]
        }
    )
    pairs = decode_prompt(prompt, "json")
    assert pairs == [("document", CHUNK_A)]
    assert all(type(p) is tuple and len(p) == 2 for p in pairs)
    for role, text in pairs:  # how ingest/batch/profiles consume it
        assert (role, text) == ("document", CHUNK_A)


def test_text_and_python_repr_encodings_unchanged():
    assert decode_body("Context: x\n", "text") == Decoded([Message("text", "Context: x\n")], {})
    assert decode_prompt(repr("a 'quoted'\nline"), "python_repr") == [("text", "a 'quoted'\nline")]
    assert decode_prompt('"rendered prompt"', "json") == [("text", "rendered prompt")]
    with pytest.raises(PromptDecodeError, match="unknown prompt_encoding"):
        decode_body("x", "base64")


# --- python_repr: the compiled fast path gives what ast.literal_eval gives -------------------------

# what a repr, a hand-written literal or a broken one holds: quotes, escapes of every kind (repr's and others), line
# breaks, NUL, surrogates, prefixes, two literals side by side
_LITERAL_PIECES = [
    *("'", '"', "''", "'''", " ", "r", "b", "u", "f"),
    *("\\", "\\\\", "\\'", '\\"', "\\n", "\\r", "\\t", "\\x4", "\\x41", "\\xe9", "\\u20", "\\u20ac", "\\ud83d"),
    *("\\U0001f600", "\\U00110000", "\\N{BULLET}", "\\0", "\\101", "\\a", "\\q", "\\\n"),
    *("\n", "\r", "\x00", "\ud800", "\u2028", "\x0c", "é", "€", "😀"),
]


def _literals():
    return pytest.importorskip("citegate_assets.lib.ingest._literals", reason="no C compiler built _literals.c")


def _literal_eval_or_none(text: str) -> str | None:
    try:
        value = ast.literal_eval(text)
    except Exception:  # noqa: BLE001 - anything literal_eval refuses
        return None
    return value if isinstance(value, str) else None


def test_the_python_repr_fast_path_is_built():
    # `make install` builds it; CI tests it rather than the literal_eval path a machine without a compiler runs
    from citegate_assets.lib.ingest import containers

    if containers._literals is None and not os.environ.get("CI"):
        pytest.skip("no C compiler built lib/ingest/_literals.c: python_repr prompts go through ast.literal_eval")
    assert containers._literals is not None


@settings(max_examples=2000, database=None)
@given(st.lists(st.one_of(st.sampled_from(_LITERAL_PIECES), st.text(max_size=4)), max_size=12).map("".join))
def test_the_fast_path_gives_literal_evals_value_or_leaves_it_to_literal_eval(text):
    literals = _literals()
    for candidate in (text, f"'{text}'", f'"{text}"'):
        fast = literals.string_literal(candidate)
        if fast is not None:
            assert type(fast) is str and fast == _literal_eval_or_none(candidate), candidate


@settings(max_examples=500, database=None)
@given(st.text(st.characters(blacklist_categories=("Cs",))))
def test_every_repr_of_a_string_takes_the_fast_path(value):
    assert _literals().string_literal(repr(value)) == value
    assert decode_prompt(f"  {value!r}\n", "python_repr") == [("text", value)]


def test_what_the_fast_path_leaves_is_read_or_refused_as_before():
    literals = _literals()
    for text, value in (("'''a'''", "a"), ("'a' 'b'", "ab"), ("'\\N{BULLET}'", "\u2022"), ("'\\101'", "A")):
        assert literals.string_literal(text) is None
        assert decode_prompt(text, "python_repr") == [("text", value)]
    for broken in ("'a", "'a\nb'", "['a']", "'\\'", "'\\x4'", "'\\U00110000'", "'\ud800'", "'a\x00'"):
        assert literals.string_literal(broken) is None
        with pytest.raises(PromptDecodeError, match="python_repr prompt"):
            decode_prompt(broken, "python_repr")
    assert literals.string_literal("''") == "" and literals.string_literal("'\\ud83d'") == "\ud83d"


# --- OpenAI completions -------------------------------------------------------------------------


def test_completions_prompt_string_and_list_of_strings():
    assert decode({"model": "gpt-3.5-turbo-instruct", "prompt": f"Context: {CHUNK_A}\nQ: {QUESTION}"}).messages == [
        Message("text", f"Context: {CHUNK_A}\nQ: {QUESTION}")
    ]
    # what langchain_openai.OpenAI sends: a list of prompt strings, each its own prompt
    d = decode(
        {
            "model": "gpt-3.5-turbo-instruct",
            "prompt": [f"Context: {CHUNK_A}\nQ: {QUESTION}", f"Context: {CHUNK_B}"],
            "max_tokens": 256,
            "temperature": 0.7,
            "n": 1,
            "logit_bias": {},
            "seed": None,
        }
    )
    assert d.messages == [Message("text", f"Context: {CHUNK_A}\nQ: {QUESTION}"), Message("text", f"Context: {CHUNK_B}")]
    assert d.skipped == {}


def test_completions_token_id_prompts_are_undecodable():
    with pytest.raises(PromptDecodeError, match=r"prompt\[0\]: is token ids"):
        decode({"model": "m", "prompt": [1212, 318, 257]})
    with pytest.raises(PromptDecodeError, match=r"prompt\[1\]: is token ids"):
        decode({"model": "m", "prompt": ["text", [1212, 318]]})


# --- OpenAI Responses ---------------------------------------------------------------------------


def test_responses_string_input_with_instructions():
    d = decode({"model": "gpt-4.1", "instructions": f"Sources:\n{CHUNK_A}", "input": QUESTION})
    assert d.messages == [Message("system", f"Sources:\n{CHUNK_A}"), Message("user", QUESTION)]


def test_responses_items_function_calls_and_parts():
    d = decode(
        {
            "model": "gpt-4.1",
            "input": [
                {"role": "developer", "content": "Cite chunk ids in brackets."},
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": QUESTION},
                        {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{PNG_B64}"},
                        {
                            "type": "input_file",
                            "filename": "policy.pdf",
                            "file_data": f"data:application/pdf;base64,{PDF_B64}",
                        },
                    ],
                },
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "search_kb",
                    "arguments": '{"q": "refunds"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": f"[kb-112#3] {CHUNK_A}"},
                {"type": "function_call", "call_id": "call_2", "name": "search_kb", "arguments": '{"q": "credit"}'},
                {
                    "type": "function_call_output",
                    "call_id": "call_2",
                    "output": [
                        {"type": "input_text", "text": f"[kb-087#1] {CHUNK_B}"},
                        {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{PNG_B64}"},
                    ],
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_1",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Checking the policy.", "annotations": []}],
                },
                {"type": "item_reference", "id": "msg_0"},
            ],
        }
    )
    assert d.messages == [
        Message("developer", "Cite chunk ids in brackets."),
        Message("user", QUESTION),
        Message("tool", f"[kb-112#3] {CHUNK_A}"),
        Message("tool", f"[kb-087#1] {CHUNK_B}"),
        Message("assistant", "Checking the policy."),
    ]
    assert d.skipped == {"input_image": 2, "input_file": 1, "reasoning": 1, "function_call": 2, "item_reference": 1}
    assert_no_base64(d)


# --- Anthropic Messages -------------------------------------------------------------------------


def test_anthropic_system_blocks_and_base64_image_excluded():
    d = decode(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": [
                {"type": "text", "text": "You answer from the documents."},
                {"type": "text", "text": f"<documents>{CHUNK_A}</documents>", "cache_control": {"type": "ephemeral"}},
            ],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/receipt.png"}},
                        {"type": "text", "text": QUESTION},
                    ],
                }
            ],
        }
    )
    assert d.messages == [
        Message("system", f"You answer from the documents.\n\n<documents>{CHUNK_A}</documents>"),
        Message("user", QUESTION),
    ]
    assert d.skipped == {"image": 2}
    assert_no_base64(d)


def test_anthropic_document_blocks_every_source_kind():
    d = decode(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": CHUNK_A},
                            "title": "kb-112#3",
                            "context": "Refund policy, updated 2026-10",
                            "citations": {"enabled": True},
                        },
                        {
                            "type": "document",
                            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
                            "title": "Card terms (PDF)",
                            "citations": {"enabled": True},
                        },
                        {
                            "type": "document",
                            "source": {
                                "type": "content",
                                "content": [
                                    {"type": "text", "text": CHUNK_B},
                                    {
                                        "type": "image",
                                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                                    },
                                    {"type": "text", "text": "Gift cards are not refundable."},
                                ],
                            },
                            "title": "kb-087",
                            "context": None,
                            "citations": {"enabled": True},
                        },
                        {
                            "type": "document",
                            "source": {"type": "url", "url": "https://example.com/terms.pdf"},
                            "citations": {"enabled": True},
                        },
                        {"type": "document", "source": {"type": "content", "content": "One plain string block."}},
                        {"type": "text", "text": QUESTION},
                    ],
                }
            ],
        }
    )
    assert d.messages == [
        Message("document", CHUNK_A, DocumentBlock("document", 0, "kb-112#3", None, "Refund policy, updated 2026-10")),
        Message("document", "", DocumentBlock("document", 1, "Card terms (PDF)", None, None)),
        Message(
            "document",
            f"{CHUNK_B}\n\nGift cards are not refundable.",
            DocumentBlock("document", 2, "kb-087", None, None),
        ),
        Message("document", "", DocumentBlock("document", 3, None, "https://example.com/terms.pdf", None)),
        Message("document", "One plain string block.", DocumentBlock("document", 4, None, None, None)),
        Message("user", QUESTION),
    ]
    assert d.skipped == {"document:base64": 1, "document:url": 1, "image": 1}
    assert_no_base64(d)
    # not merged into the surrounding message (the old decoder appended source.data to the user text)
    assert decode_prompt(
        body(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Before."},
                            {
                                "type": "document",
                                "source": {"type": "text", "media_type": "text/plain", "data": CHUNK_A},
                            },
                            {"type": "text", "text": "After."},
                        ],
                    }
                ]
            }
        ),
        "json",
    ) == [("user", "Before."), ("document", CHUNK_A), ("user", "After.")]


def test_anthropic_search_results_tool_use_and_tool_results():
    search_a = {
        "type": "search_result",
        "source": "kb-112#3",
        "title": "Refund policy",
        "content": [{"type": "text", "text": CHUNK_A}, {"type": "text", "text": "Approval takes one day."}],
        "citations": {"enabled": True},
    }
    search_b = {
        "type": "search_result",
        "source": "kb-087#1",
        "title": "Store credit",
        "content": [{"type": "text", "text": CHUNK_B}],
    }
    d = decode(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": "Answer with citations.",
            "messages": [
                {"role": "user", "content": [search_a, {"type": "text", "text": QUESTION}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Need the credit policy.", "signature": "EqQBCgIYAh"},
                        {"type": "text", "text": "Let me search."},
                        {"type": "tool_use", "id": "toolu_01", "name": "search_kb", "input": {"query": "store credit"}},
                        {"type": "tool_use", "id": "toolu_02", "name": "lookup_order", "input": {"order": "A-1"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_01", "content": [search_b]},
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_02",
                            "content": [
                                {"type": "text", "text": "Order A-1: refunded 2026-11-01."},
                                {
                                    "type": "image",
                                    "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                                },
                            ],
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_03",
                            "content": "Order A-2: not found.",
                            "is_error": True,
                        },
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "Terms apply."},
                            "title": "terms",
                        },
                        {"type": "text", "text": "Now answer."},
                    ],
                },
            ],
        }
    )
    assert d.messages == [
        Message("system", "Answer with citations."),
        Message(
            "document",
            f"{CHUNK_A}\n\nApproval takes one day.",
            DocumentBlock("search_result", 0, "Refund policy", "kb-112#3", None),
        ),
        Message("user", QUESTION),
        Message("assistant", "Let me search."),
        Message("document", CHUNK_B, DocumentBlock("search_result", 1, "Store credit", "kb-087#1", None)),
        Message("tool", "Order A-1: refunded 2026-11-01."),
        Message("tool", "Order A-2: not found."),
        # search_result_index and document_index count separately, as Anthropic citations do
        Message("document", "Terms apply.", DocumentBlock("document", 0, "terms", None, None)),
        Message("user", "Now answer."),
    ]
    assert d.skipped == {"thinking": 1, "tool_use": 2, "image": 1}
    assert_no_base64(d)


# --- OpenTelemetry GenAI ------------------------------------------------------------------------

OTEL_MESSAGES = [
    {"role": "system", "parts": [{"type": "text", "content": f"Sources:\n(source: kb-112#3) {CHUNK_A}"}]},
    {
        "role": "user",
        "parts": [
            {"type": "text", "content": QUESTION},
            {"type": "blob", "modality": "image", "mime_type": "image/png", "content": PNG_B64},
            {"type": "uri", "modality": "image", "uri": "https://example.com/receipt.png"},
        ],
    },
    {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "look it up"},
            {"type": "tool_call", "id": "call_1", "name": "search_kb", "arguments": {"q": "credit"}},
        ],
    },
    {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": "call_1", "response": f"(source: kb-087#1) {CHUNK_B}"},
            {"type": "tool_call_response", "id": "call_2", "response": {"hits": 0}},
        ],
    },
]
OTEL_EXPECTED = [
    Message("system", f"Sources:\n(source: kb-112#3) {CHUNK_A}"),
    Message("user", QUESTION),
    Message("assistant", ""),
    Message("tool", f"(source: kb-087#1) {CHUNK_B}"),
]
OTEL_SKIPPED = {"blob": 1, "uri": 1, "reasoning": 1, "tool_call": 1, "tool_call_response": 1}


def test_otel_parts_messages_as_top_level_list_and_under_messages():
    for d in (decode(OTEL_MESSAGES), decode({"model": "gpt-4.1", "messages": OTEL_MESSAGES})):
        assert d.messages == OTEL_EXPECTED
        assert d.skipped == OTEL_SKIPPED
        assert_no_base64(d)


def test_otel_span_attributes_as_json_strings():
    d = decode(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Answer from the sources."}]),
            "gen_ai.input.messages": json.dumps(OTEL_MESSAGES[1:2]),
        }
    )
    assert d.messages == [Message("system", "Answer from the sources."), Message("user", QUESTION)]
    assert d.skipped == {"blob": 1, "uri": 1}


# --- unknown parts and errors -------------------------------------------------------------------


def test_unknown_part_types_are_skipped_and_counted_never_fatal():
    d = decode(
        {
            "system": [{"type": "text", "text": "S"}, {"type": "hologram", "data": "zzz"}],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "hologram", "data": "zzz"},
                        7,
                        None,
                        {"text": "untyped text"},
                        {"data": "untyped, no text"},
                        {"type": {"weird": 1}},
                    ],
                },
                {"role": "user", "content": [{"type": "document", "source": {"type": "hologram"}, "title": "t"}]},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "search_result",
                            "source": "s",
                            "title": "T",
                            "content": [{"type": "text", "text": "x"}, {"type": "hologram"}],
                        }
                    ],
                },
            ],
        }
    )
    assert d.messages == [
        Message("system", "S"),
        Message("user", "a\n\nuntyped text"),
        Message("document", "", DocumentBlock("document", 0, "t", None, None)),
        Message("document", "x", DocumentBlock("search_result", 0, "T", "s", None)),
    ]
    assert d.skipped == {
        "hologram": 3,
        "<a number>": 1,
        "<null>": 1,
        "<untyped>": 1,
        "<an object>": 1,
        "document:hologram": 1,
    }
    d = decode(
        {"input": [{"type": "web_search_call", "id": "ws_1", "status": "completed"}, {"role": "user", "content": "q"}]}
    )
    assert d.messages == [Message("user", "q")] and d.skipped == {"web_search_call": 1}


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ('{"messages": [{"role": "user", "content": "x"}', "not valid JSON"),
        ("42", "is a number, not a request body object"),
        ("null", "is null, not a request body object"),
        ("[1, 2]", r"\[0\]: is a number, not a message object"),
        ("[]", "empty list"),
        ('{"model": "gpt", "temperature": 0}', "has no 'messages', 'input', 'prompt'"),
        ('{"messages": "Context: ..."}', "messages: is a string, not a list"),
        (
            '{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, "c"]}',
            r"messages\[2\]: is a string, not a message object",
        ),
        (
            '{"messages": [{"role": "user", "content": "a"}, {"role": "user"}]}',
            r"messages\[1\]: has no 'content' or 'parts'",
        ),
        ('{"messages": [{"role": "user", "content": 5}]}', r"messages\[0\]\.content: is a number"),
        ('{"messages": [{"role": "tool", "parts": {"type": "text"}}]}', r"messages\[0\]\.parts: is an object"),
        ('{"input": 3}', "input: is a number"),
        ('{"prompt": null}', "prompt: is null"),
        ('{"gen_ai.input.messages": "[{"}', r'\["gen_ai.input.messages"\]: is not valid JSON'),
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ],
)
def test_errors_name_the_json_path(prompt, message):
    with pytest.raises(PromptDecodeError, match=message):
        decode_body(prompt, "json")
    with pytest.raises(PromptDecodeError):
        decode_prompt(prompt, "json")


def test_nested_tool_results_are_not_recursed_into():
    content: object = [{"type": "text", "text": "leaf"}]
    for _ in range(300):  # tool_result inside tool_result is not recursed into
        content = [{"type": "tool_result", "tool_use_id": "t", "content": content}]
    d = decode({"messages": [{"role": "user", "content": content}]})
    assert d.messages == [Message("tool", "")] and d.skipped == {"tool_result": 1}


# --- the blocks a block location indexes (trace-formats.md section 0 finding 1) ---------------


def test_search_results_and_content_documents_keep_their_blocks_and_source_type():
    """A `content_block_location` / `search_result_location` indexes the entries of the block's `content`
    array; the decoder keeps them (text, or None for an entry with none) beside the decoded text, which is
    unchanged: the blocks' texts joined by a blank line. They take no part in ==, so earlier decodings compare
    as before."""
    d = decode(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "search_result",
                            "source": "kb-112#3",
                            "title": "Refund policy",
                            "content": [
                                {"type": "text", "text": CHUNK_A},
                                {"type": "text", "text": "Approval: 1 day."},
                            ],
                        },
                        {
                            "type": "document",
                            "source": {
                                "type": "content",
                                "content": [
                                    {"type": "text", "text": CHUNK_B},
                                    {
                                        "type": "image",
                                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                                    },
                                    {"type": "text", "text": "Gift cards are not refundable."},
                                ],
                            },
                            "title": "kb-087",
                            "context": '{"chunk_id": "kb-087#1"}',
                        },
                        {"type": "document", "source": {"type": "content", "content": "One string block."}},
                        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": CHUNK_A}},
                        {
                            "type": "document",
                            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
                        },
                        QUESTION,
                    ],
                }
            ]
        }
    )
    blocks = [m.block for m in d.messages if m.block is not None]
    assert [(b.kind, b.index, b.source_type, b.blocks) for b in blocks] == [
        ("search_result", 0, None, (CHUNK_A, "Approval: 1 day.")),
        ("document", 0, "content", (CHUNK_B, None, "Gift cards are not refundable.")),
        ("document", 1, "content", ("One string block.",)),
        ("document", 2, "text", None),
        ("document", 3, "base64", None),
    ]
    assert [m.text for m in d.messages] == [
        f"{CHUNK_A}\n\nApproval: 1 day.",
        f"{CHUNK_B}\n\nGift cards are not refundable.",
        "One string block.",
        CHUNK_A,
        "",
        QUESTION,
    ]
    assert blocks[1] == DocumentBlock("document", 0, "kb-087", None, '{"chunk_id": "kb-087#1"}')  # blocks not compared
    assert d.skipped == {"image": 1, "document:base64": 1}
    assert_no_base64(d)


def test_a_citation_into_a_search_result_or_content_document_is_not_span_missing():
    """The gate (through the guard, which gives the nightly verdicts) finds a cited block of a search result and
    of a content document, a single block and a block range, in the decoded prompt."""
    from citegate_assets.guard import check_citations

    prompt = body(
        {
            "model": "claude-sonnet-4-6",
            "max_tokens": 512,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "search_result",
                            "source": "kb-112#3",
                            "title": "Refund policy",
                            "content": [
                                {"type": "text", "text": CHUNK_A},
                                {"type": "text", "text": "Approval: 1 day."},
                            ],
                            "citations": {"enabled": True},
                        },
                        {
                            "type": "document",
                            "source": {
                                "type": "content",
                                "content": [{"type": "text", "text": CHUNK_B}, {"type": "text", "text": "No expiry."}],
                            },
                            "title": "kb-087#1",
                            "citations": {"enabled": True},
                        },
                        {"type": "text", "text": QUESTION},
                    ],
                }
            ],
        }
    )
    retrieved = [
        {"chunk_id": "kb-112#3", "text": f"{CHUNK_A}\n\nApproval: 1 day."},
        {"chunk_id": "kb-087#1", "text": f"{CHUNK_B}\n\nNo expiry."},
    ]
    citations = [
        {"chunk_id": "kb-112#3", "span": "Approval: 1 day.", "claim": "Approval takes a day."},
        {"chunk_id": "kb-112#3", "span": f"{CHUNK_A}\n\nApproval: 1 day.", "claim": "Refunds take 5 days."},
        {"chunk_id": "kb-087#1", "span": CHUNK_B, "claim": "Store credit is immediate."},
        {"chunk_id": "kb-087#1", "span": f"{CHUNK_B}\n\nNo expiry.", "claim": "Store credit never expires."},
    ]
    report = check_citations(prompt, retrieved, citations, encoding="json")
    assert [c.reason for c in report.citations] == ["ok"] * 4
