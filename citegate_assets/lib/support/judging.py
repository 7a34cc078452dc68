"""Judging through the cache: look up, call the judge for what is missing, store what it answered.

The cache is keyed by (judge model, template version, normalized passage, normalized claim), so
re-running a partition, or calibrating on a pair the nightly run already judged, makes no call.
No DuckDB connection is held while the judge is called: `connect` is opened for each lookup and
each write, and answers are written chunk by chunk so a killed run keeps what it paid for. Every answer and batch
state is masked with the judge's SecretMask before it is stored or logged (lib/support/judge/secrets.py).

`judge_items_batch` is the same with the pairs sent as OpenAI Batch API jobs ([judge] mode = "batch"): each batch
is recorded in `judge_batches` (with its pairs in `judge_batch_items`) as soon as the provider has created it,
so a run killed or timed out while waiting collects that batch on its next run instead of paying again. A pair
whose batch is still open at the deadline is `error` with raw_answer "batch pending: ..." (not cached, not a
pass; the next run collects it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Literal

import duckdb
import polars as pl

from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP, utc_now
from citegate_assets.lib.storage.warehouse import load_sql, query, run_script, transaction
from citegate_assets.lib.support.judge.base import Judge, JudgeRequest, JudgeResult
from citegate_assets.lib.support.judge.batch_state import BatchState, BatchSubmitError, pending_answer
from citegate_assets.lib.support.judge.factory import estimated_cost
from citegate_assets.lib.support.judge.prompt import TEMPLATE_VERSION
from citegate_assets.lib.support.judge.secrets import SecretMask, secret_mask_of

if TYPE_CHECKING:  # the client imports openai, which a run without the Batch API never needs
    from citegate_assets.lib.support.judge.batch import BatchClient

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
SideBySide = Literal["ascending", "descending"]
SIDE_BY_SIDE_CLOCK_MARGIN = timedelta(minutes=10)
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


def _headline(error: str) -> str:
    """An error's kind and HTTP status, without the message after them ("upload failed: HTTP 400: ...")."""
    parts = error.split(": ")
    return ": ".join(parts[:2] if len(parts) > 1 and parts[1].startswith("HTTP ") else parts[:1])


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
    side_by_side: SideBySide | None = None,
) -> tuple[pl.DataFrame, dict]:
    """items: item_id, passage, claim (normalized). Returns one result row per item and run facts.

    side_by_side: other runs may be judging the same pairs now (day runs side by side): the misses are taken in
    the order it names and each chunk's are looked up again first, so a pair another run has answered meanwhile
    is not paid for twice. Runs side by side take opposite orders and meet in the middle."""
    model = judge.model
    mask = secret_mask_of(judge)
    # what another run stores from now on (less a margin for clocks of other machines) is looked up again
    started = utc_now() - SIDE_BY_SIDE_CLOCK_MARGIN
    keyed, keys, cached, misses = _plan(connect, items, model)
    if side_by_side is not None:
        misses = misses.sort("cache_key", descending=side_by_side == "descending")
    fresh: dict[str, dict] = {}
    total = misses.height
    done = calls = 0
    reported = -1

    def report(n: int) -> None:
        """Each count once: the judge reports its chunk's end, and the chunk's end is reported again below."""
        nonlocal reported
        if progress and n != reported:
            reported = n
            progress(n, total)

    for offset in range(0, total, chunk):
        part = misses.slice(offset, chunk)
        if side_by_side is not None and offset:
            answered = _lookup(connect, part.select("cache_key"), since=started)
            if answered:
                cached.update(answered)
                part = part.filter(~pl.col("cache_key").is_in(list(answered)))
        requests = [JudgeRequest(k, p, c) for k, p, c in zip(part["cache_key"], part["passage"], part["claim"])]
        base = done

        def chunk_progress(n: int, _total: int, base: int = base) -> None:
            report(base + n)

        results = judge.judge(requests, chunk_progress) if requests else []
        now = utc_now()
        rows = [_row(r, model, prices, now, mask) for r in results]
        for request, row in zip(requests, rows):
            fresh[request.key] = row
        _store(connect, [(_shas(req), row) for req, row in zip(requests, rows) if row["verdict"] != "error"])
        calls += len(requests)
        done = min(total, offset + chunk)
        report(done)
    return _assemble(items, keyed, keys, cached, fresh, calls)


def judge_items_batch(
    connect: Connect,
    items: pl.DataFrame,
    client: BatchClient,
    prices: dict,
    *,
    days: tuple[date, date],
    log: Callable[[str], None] | None = None,
) -> tuple[pl.DataFrame, dict]:
    """judge_items through the Batch API: the same cache, parser and error rules; cost_usd at the batch discount.

    1. Pairs already in an open batch of this judge model and template version (a killed or timed-out run's)
       are not submitted again. 2. The other uncached pairs go out in batches of at most `max_requests`, each
       recorded with its pairs as soon as it exists. 3. These batches are polled until all are done or the
       deadline; other open batches (another run's days) are looked at once. A finished batch's answers are
       cached and the batch closed, in one transaction, including pairs this run did not ask for. 4. A pair
       still in an open batch is `error` ("batch pending: ...")."""
    mask = client.secret_mask
    say = (lambda text: log(mask(text))) if log is not None else (lambda _text: None)
    model = client.model
    keyed, keys, cached, misses = _plan(connect, items, model)
    requests = [JudgeRequest(k, p, c) for k, p, c in zip(misses["cache_key"], misses["passage"], misses["claim"])]
    fresh: dict[str, dict] = {}
    factor = client.batch.discount
    facts = {
        "batches_resumed": 0,
        "batches_submitted": 0,
        "batches_collected": 0,
        "batches_open": 0,
        "batch_pending": 0,
    }

    covered = _open_batches(connect, model, [r.key for r in requests])
    resumed = sorted(set(covered.values()))
    facts["batches_resumed"] = len(resumed)
    if resumed:
        say(f"judge batch: resuming {len(resumed)} open batch(es) holding {len(covered):,} of the pairs: {resumed}")
    to_send = [r for r in requests if r.key not in covered]
    batch_ids = list(resumed)
    size = client.batch.max_requests
    for offset in range(0, len(to_send), size):
        part = to_send[offset : offset + size]
        try:
            batch_id, input_file_id, status = client.submit(
                part, metadata={"citegate_days": f"{days[0]}..{days[1]}", "citegate_template": TEMPLATE_VERSION}
            )
        except BatchSubmitError as exc:
            # the provider's message may quote the pairs sent: the run log (Dagster's, kept for good) gets its
            # head only; the whole text is each pair's raw_answer, which retention and forget clear
            say(f"judge batch: not submitted ({_headline(str(exc))}): {len(part):,} pairs, judged again next run")
            now = utc_now()
            for req in part:
                fresh[req.key] = _row(
                    JudgeResult(req.key, "error", str(exc), attempts=1), model, prices, now, mask, factor
                )
            continue
        _record_batch(connect, batch_id, input_file_id, mask(status), model, days, part)
        facts["batches_submitted"] += 1
        batch_ids.append(batch_id)
        say(f"judge batch: submitted {batch_id} with {len(part):,} pairs ({status})")

    # another run's open batches (other days) are looked at once, not waited for: done ones go into the cache
    others = [b for b in _open_batch_ids(connect, model) if b not in batch_ids]
    states = (
        client.wait(batch_ids, on_poll=lambda st: say(f"judge batch: {st.batch_id} is {st.status}"))
        if batch_ids
        else {}
    )
    for batch_id in others:
        states[batch_id] = client.retrieve(batch_id)
    for batch_id in batch_ids + others:
        state = states[batch_id]
        _update_batch(connect, state, mask)
        if state.terminal:
            try:
                collected = _collect(connect, client, state, prices, factor)
            except OSError as exc:  # the results could not be downloaded: the batch stays open
                state = BatchState(batch_id, state.status, detail=str(exc))
                _update_batch(connect, state, mask)
                collected = None
            if collected is not None:
                for key, row in collected.items():  # an answer wins over another batch's error for the same pair
                    if key not in fresh or fresh[key]["verdict"] == "error":
                        fresh[key] = row
                facts["batches_collected"] += 1
                continue
        facts["batches_open"] += 1
        if batch_id in others:
            continue
        now = utc_now()
        text = pending_answer(state) + (f" ({state.detail})" if state.detail else "")
        for key in _batch_keys(connect, batch_id):
            fresh[key] = _row(JudgeResult(key, "error", text, attempts=0), model, prices, now, mask, factor)
    # every wanted miss has a row: a key the batches did not answer (none should remain) is an error too
    now = utc_now()
    for req in requests:
        if req.key not in fresh:
            lost = JudgeResult(req.key, "error", "batch: no result for this pair", attempts=0)
            fresh[req.key] = _row(lost, model, prices, now, mask, factor)
    facts["batch_pending"] = sum(1 for r in requests if str(fresh[r.key]["raw_answer"]).startswith("batch pending"))
    result, base = _assemble(items, keyed, keys, cached, {r.key: fresh[r.key] for r in requests}, len(requests))
    return result, {**base, **facts}


def _plan(connect: Connect, items: pl.DataFrame, model: str) -> tuple[pl.DataFrame, list[str], dict, pl.DataFrame]:
    """The items keyed by cache key, their cached answers, and the distinct misses in first-seen order."""
    keys = [
        cache_key(model, TEMPLATE_VERSION, p, c) for p, c in zip(items["passage"].to_list(), items["claim"].to_list())
    ]
    keyed = items.select("item_id", "passage", "claim").with_columns(cache_key=pl.Series(keys, dtype=pl.String))
    cached = _lookup(connect, keyed.select("cache_key").unique())
    misses = keyed.filter(~pl.col("cache_key").is_in(list(cached))).unique(
        "cache_key", keep="first", maintain_order=True
    )
    return keyed, keys, cached, misses


def _assemble(
    items: pl.DataFrame, keyed: pl.DataFrame, keys: list[str], cached: dict, fresh: dict[str, dict], calls: int
) -> tuple[pl.DataFrame, dict]:
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
        "judge_calls": calls,
        "errors": sum(1 for r in fresh.values() if r["verdict"] == "error"),
    }
    return pl.DataFrame(out, schema=RESULT_SCHEMA) if out else pl.DataFrame(schema=RESULT_SCHEMA), facts


# -- batch bookkeeping: each opens a connection for one statement or transaction, between network calls ----------


def _open_batches(connect: Connect, model: str, keys: list[str]) -> dict[str, str]:
    """cache key -> the open batch that carries it (the oldest, should two)."""
    if not keys:
        return {}
    wanted = pl.DataFrame({"cache_key": keys}, schema={"cache_key": pl.String}).unique()
    with connect() as con:
        con.register("wanted_keys", wanted.to_arrow())
        try:
            rows = query(
                con, "support/batch_open", {"judge_model": model, "template_version": TEMPLATE_VERSION}
            ).fetchall()
        finally:
            con.unregister("wanted_keys")
    out: dict[str, str] = {}
    for batch_id, key in rows:
        out.setdefault(key, batch_id)
    return out


def _open_batch_ids(connect: Connect, model: str) -> list[str]:
    """Every batch of this judge model and template version not yet collected, oldest first."""
    with connect() as con:
        rows = query(
            con, "support/batch_open_all", {"judge_model": model, "template_version": TEMPLATE_VERSION}
        ).fetchall()
    return [batch_id for (batch_id,) in rows]


def _record_batch(
    connect: Connect,
    batch_id: str,
    input_file_id: str,
    status: str,
    model: str,
    days: tuple[date, date],
    part: list[JudgeRequest],
) -> None:
    pairs = pl.DataFrame(
        [{"cache_key": r.key, **_shas(r)} for r in part],
        schema={"cache_key": pl.String, "passage_sha256": pl.String, "claim_sha256": pl.String},
    )
    params = {
        "batch_id": batch_id,
        "judge_model": model,
        "template_version": TEMPLATE_VERSION,
        "day_start": days[0],
        "day_end": days[1],
        "requests": len(part),
        "input_file_id": input_file_id,
        "status": status,
        "now": utc_now(),
    }
    with connect() as con, transaction(con):
        con.register("new_batch_items", pairs.to_arrow())
        try:
            run_script(con, "support/batch_record", params)
        finally:
            con.unregister("new_batch_items")


def _update_batch(connect: Connect, state: BatchState, mask: SecretMask) -> None:
    params = {
        "batch_id": state.batch_id,
        "status": mask(state.status),
        "output_file_id": state.output_file_id,
        "error_file_id": state.error_file_id,
        "detail": mask.optional(state.detail),
        "now": utc_now(),
    }
    with connect() as con:
        run_script(con, "support/batch_status", params)


def _batch_items(connect: Connect, batch_id: str) -> list[tuple[str, str, str]]:
    with connect() as con:
        return query(con, "support/batch_items", {"batch_id": batch_id}).fetchall()


def _batch_keys(connect: Connect, batch_id: str) -> list[str]:
    return [key for key, _p, _c in _batch_items(connect, batch_id)]


def _collect(connect: Connect, client: BatchClient, state: BatchState, prices: dict, factor: float) -> dict[str, dict]:
    """Download a finished batch's answers (network), then cache them and close the batch (one transaction).
    Returns key -> result row for every pair of the batch."""
    pairs = _batch_items(connect, state.batch_id)
    results = client.collect(state, [key for key, _p, _c in pairs])
    now = utc_now()
    rows = {key: _row(results[key], client.model, prices, now, client.secret_mask, factor) for key, _p, _c in pairs}
    entries = [
        ({"cache_key": key, "passage_sha256": p, "claim_sha256": c}, rows[key])
        for key, p, c in pairs
        if rows[key]["verdict"] != "error"
    ]
    with connect() as con, transaction(con):
        _store_on(con, entries)
        run_script(con, "support/batch_collected", {"batch_id": state.batch_id, "now": now})
    return rows


def _row(r: JudgeResult, model: str, prices: dict, now: datetime, mask: SecretMask, factor: float = 1.0) -> dict:
    """A judge's result as every table stores it, the raw answer masked (lib/support/judge/secrets.py: the one place a
    judge's text passes before it is stored). factor: the share of the online price paid ([judge].batch_discount
    for a batch call)."""
    cost = (
        0.0
        if model.startswith(HEURISTIC_PREFIX)
        else estimated_cost(prices, model, r.prompt_tokens, r.completion_tokens)
    )
    if cost is not None:
        cost *= factor
    return {
        "judge_model": model,
        "template_version": TEMPLATE_VERSION,
        "verdict": r.verdict,
        "raw_answer": mask.optional(r.raw_answer),
        "latency_ms": r.latency_ms,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cost_usd": cost,
        "attempts": r.attempts,
        "judged_at": now,
    }


def _lookup(connect: Connect, keys: pl.DataFrame, since: datetime | None = None) -> dict[str, dict]:
    """Cached answers for these keys; since: only those stored from then on (reads only recent row groups)."""
    if keys.is_empty():
        return {}
    with connect() as con:
        con.register("wanted_keys", keys.to_arrow())
        try:
            if since is None:
                rel = query(con, "support/cache_lookup")
            else:
                rel = query(con, "support/cache_lookup_since", {"since": since})
            cols = rel.columns
            rows = rel.fetchall()
        finally:
            con.unregister("wanted_keys")
    out = {}
    for values in rows:
        record = dict(zip(cols, values))
        out[record.pop("cache_key")] = record
    return out


def _shas(req: JudgeRequest) -> dict[str, str]:
    return {"cache_key": req.key, "passage_sha256": _sha(req.passage), "claim_sha256": _sha(req.claim)}


def _store(connect: Connect, entries: list[tuple[dict, dict]]) -> None:
    if not entries:
        return
    with connect() as con:
        _store_on(con, entries)


def _store_on(con: duckdb.DuckDBPyConnection, entries: list[tuple[dict, dict]]) -> None:
    """entries: ({cache_key, passage_sha256, claim_sha256}, result row); an `error` is never stored."""
    if not entries:
        return
    frame = pl.DataFrame(
        [
            {
                "cache_key": ident["cache_key"],
                "judge_model": row["judge_model"],
                "template_version": row["template_version"],
                "passage_sha256": ident["passage_sha256"],
                "claim_sha256": ident["claim_sha256"],
                "verdict": row["verdict"],
                "raw_answer": row["raw_answer"],
                "prompt_tokens": row["prompt_tokens"],
                "completion_tokens": row["completion_tokens"],
                "latency_ms": row["latency_ms"],
                "cost_usd": row["cost_usd"],
                "judged_at": row["judged_at"],
            }
            for ident, row in entries
        ],
        schema_overrides={
            "prompt_tokens": pl.Int32,
            "completion_tokens": pl.Int32,
            "latency_ms": pl.Float64,
            "cost_usd": pl.Float64,
        },
    )
    con.register("new_cache_rows", frame.to_arrow())
    try:
        con.execute(load_sql("support/cache_store"))
    finally:
        con.unregister("new_cache_rows")
