"""Malformed lines planted between the good records: what kinds, where, and each bad line itself."""

from __future__ import annotations

import ast
import json
from collections import deque
from random import Random
from typing import Any

from citegate_assets.lib.loggen.request import json_line

MALFORMED_KINDS = (
    "invalid_json",
    "missing_field",
    "wrong_type",
    "citations_unparseable",
    "citation_empty_span",
    "duplicate_same",
    "duplicate_conflict",
    "timestamp_no_timezone",
)
MALFORMED_EVERY = 150  # about one malformed line per this many good records
# Malformed kinds whose line is still a record: its prompt is ingested, only its answer is rejected
# (answer_rejects), so a run holds records + these lines as prompts. Every other kind is a rejected line.
PROMPT_KEPT_KINDS = ("citations_unparseable", "citation_empty_span")


def plan_malformed(rng: Random, days: int, per_day: int) -> dict[int, dict[int, list[str]]]:
    """day index -> {good-record slot after which to insert: [kinds]}; every kind at least once."""
    n = max(len(MALFORMED_KINDS), round(days * per_day / MALFORMED_EVERY))
    kinds = list(MALFORMED_KINDS) + [rng.choice(MALFORMED_KINDS) for _ in range(n - len(MALFORMED_KINDS))]
    rng.shuffle(kinds)
    plan: dict[int, dict[int, list[str]]] = {}
    for kind in kinds:
        # slot >= 1: a duplicate always has an earlier record of the same file to copy
        plan.setdefault(rng.randrange(days), {}).setdefault(rng.randint(1, per_day), []).append(kind)
    return plan


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _alter_prompt(prompt: str, encoding: str) -> str:
    """A different prompt in the same encoding (a retry that re-rendered the request)."""
    if encoding == "json":
        body = json.loads(prompt)
        body["messages"][-1]["content"] += " (resent)"
        return json.dumps(body)
    if encoding == "python_repr":
        return repr(ast.literal_eval(prompt) + "\n(resent)")
    return prompt + "\n(resent)"


def malformed_line(kind: str, rng: Random, base: dict[str, Any], recent: deque[tuple[str, dict[str, Any]]]) -> str:
    """One bad line of `kind`; `base` is a fresh valid record to break, `recent` earlier good lines."""
    record = dict(base)
    if kind == "invalid_json":
        line = json_line(record)
        return line[: rng.randint(len(line) // 4, 3 * len(line) // 4)]  # a writer killed mid-line
    if kind == "missing_field":
        del record[rng.choice(("request_id", "prompt"))]
    elif kind == "wrong_type":
        if rng.random() < 0.5:
            record["retrieved"] = ",".join(r["chunk_id"] for r in record["retrieved"])
        else:
            record["prompt"] = len(record["prompt"])
    elif kind == "citations_unparseable":
        cits = record["citations"] if isinstance(record["citations"], list) else json.loads(record["citations"])
        bad = repr(cits) if rng.random() < 0.5 else json.dumps(cits)[: -rng.randint(3, 20)]
        record["citations"] = bad if not _is_json(bad) else bad + "]]"  # guard: must not parse
    elif kind == "citation_empty_span":
        cits = record["citations"] if isinstance(record["citations"], list) else json.loads(record["citations"])
        cits = [dict(c) for c in cits]
        rng.choice(cits)["span"] = ""
        record["citations"] = cits
    elif kind == "duplicate_same":
        return rng.choice(recent)[0]
    elif kind == "duplicate_conflict":
        earlier = dict(rng.choice(recent)[1])
        earlier["prompt"] = _alter_prompt(earlier["prompt"], earlier.get("prompt_encoding", "text"))
        return json_line(earlier)
    elif kind == "timestamp_no_timezone":
        record["logged_at"] = record["logged_at"][:19]  # "2026-11-03T10:00:00": local to whom?
    return json_line(record)
