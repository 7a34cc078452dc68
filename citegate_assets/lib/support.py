"""Judging through the cache: look up, call the judge for what is missing, store what it answered.

The cache is keyed by (judge model, template version, normalized passage, normalized claim), so
re-running a partition, or calibrating on a pair the nightly run already judged, makes no call.
No DuckDB connection is held while the judge is called: `connect` is opened for each lookup and
each write, and answers are written chunk by chunk so a killed run keeps what it paid for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime

import duckdb
import polars as pl

from .judge.base import Judge, JudgeRequest, JudgeResult
from .judge.factory import estimated_cost
from .judge.prompt import TEMPLATE_VERSION
from .timestamps import UTC_TIMESTAMP, utc_now
from .warehouse import load_sql, query

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
CHUNK = 1024  # answers written every this many calls: a killed run keeps all but the last chunk
HEURISTIC_PREFIX = "citegate-heuristic"

RESULT_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "item_id": pl.String,
    "judge_model": pl.String,
    "template_version": pl.String,
    "verdict": pl.String,
    "raw_answer": pl.String,
    "cache_hit": pl.Boolean,
    "latency_ms": pl.Float64,
    "prompt_tokens": pl.Int32,
    "completion_tokens": pl.Int32,
    "cost_usd": pl.Float64,
    "attempts": pl.Int32,
    "judged_at": UTC_TIMESTAMP,
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def cache_key(judge_model: str, template_version: str, passage: str, claim: str) -> str:
    return _sha("\x1f".join((judge_model, template_version, _sha(passage), _sha(claim))))


def judge_items(
    connect: Connect,
    items: pl.DataFrame,
    judge: Judge,
    prices: dict,
    *,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = CHUNK,
) -> tuple[pl.DataFrame, dict]:
    """items: item_id, passage, claim (normalized). Returns one result row per item and run facts."""
    model = judge.model
    keys = [
        cache_key(model, TEMPLATE_VERSION, p, c) for p, c in zip(items["passage"].to_list(), items["claim"].to_list())
    ]
    keyed = items.select("item_id", "passage", "claim").with_columns(cache_key=pl.Series(keys, dtype=pl.String))
    cached = _lookup(connect, keyed.select("cache_key").unique())
    misses = keyed.filter(~pl.col("cache_key").is_in(list(cached))).unique(
        "cache_key", keep="first", maintain_order=True
    )
    fresh: dict[str, dict] = {}
    total = misses.height
    done = 0
    for offset in range(0, total, chunk):
        part = misses.slice(offset, chunk)
        requests = [JudgeRequest(k, p, c) for k, p, c in zip(part["cache_key"], part["passage"], part["claim"])]
        base = done

        def chunk_progress(n: int, _total: int, base: int = base) -> None:
            if progress:
                progress(base + n, total)

        results = judge.judge(requests, chunk_progress)
        now = utc_now()
        rows = [_row(r, model, prices, now) for r in results]
        for request, row in zip(requests, rows):
            fresh[request.key] = row
        _store(connect, [(req, row) for req, row in zip(requests, rows) if row["verdict"] != "error"])
        done += len(requests)
        if progress:
            progress(done, total)
    out, first_use = [], set()
    for item_id, key in zip(keyed["item_id"].to_list(), keys):
        if key in cached:
            out.append({"item_id": item_id, **cached[key], "cache_hit": True})
        else:
            row = fresh[key]
            # a second citation with the same passage and claim reuses this run's call
            out.append({"item_id": item_id, **row, "cache_hit": key in first_use})
            first_use.add(key)
    facts = {
        "items": items.height,
        "cache_hits": sum(1 for r in out if r["cache_hit"]),
        "judge_calls": total,
        "errors": sum(1 for r in fresh.values() if r["verdict"] == "error"),
    }
    return pl.DataFrame(out, schema=RESULT_SCHEMA) if out else pl.DataFrame(schema=RESULT_SCHEMA), facts


def _row(r: JudgeResult, model: str, prices: dict, now: datetime) -> dict:
    cost = (
        0.0
        if model.startswith(HEURISTIC_PREFIX)
        else estimated_cost(prices, model, r.prompt_tokens, r.completion_tokens)
    )
    return {
        "judge_model": model,
        "template_version": TEMPLATE_VERSION,
        "verdict": r.verdict,
        "raw_answer": r.raw_answer,
        "latency_ms": r.latency_ms,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cost_usd": cost,
        "attempts": r.attempts,
        "judged_at": now,
    }


def _lookup(connect: Connect, keys: pl.DataFrame) -> dict[str, dict]:
    if keys.is_empty():
        return {}
    with connect() as con:
        con.register("wanted_keys", keys.to_arrow())
        try:
            rel = query(con, "support/cache_lookup")
            cols = rel.columns
            rows = rel.fetchall()
        finally:
            con.unregister("wanted_keys")
    out = {}
    for values in rows:
        record = dict(zip(cols, values))
        out[record.pop("cache_key")] = record
    return out


def _store(connect: Connect, pairs: list[tuple[JudgeRequest, dict]]) -> None:
    if not pairs:
        return
    frame = pl.DataFrame(
        [
            {
                "cache_key": req.key,
                "judge_model": row["judge_model"],
                "template_version": row["template_version"],
                "passage_sha256": _sha(req.passage),
                "claim_sha256": _sha(req.claim),
                "verdict": row["verdict"],
                "raw_answer": row["raw_answer"],
                "prompt_tokens": row["prompt_tokens"],
                "completion_tokens": row["completion_tokens"],
                "latency_ms": row["latency_ms"],
                "cost_usd": row["cost_usd"],
                "judged_at": row["judged_at"],
            }
            for req, row in pairs
        ],
        schema_overrides={
            "prompt_tokens": pl.Int32,
            "completion_tokens": pl.Int32,
            "latency_ms": pl.Float64,
            "cost_usd": pl.Float64,
        },
    )
    with connect() as con:
        con.register("new_cache_rows", frame.to_arrow())
        try:
            con.execute(load_sql("support/cache_store"))
        finally:
            con.unregister("new_cache_rows")
