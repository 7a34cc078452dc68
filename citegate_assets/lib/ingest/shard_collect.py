"""The collect step of a sharded ingest (lib/ingest/shards.py): the one writer of the working warehouse loads the marked
shard
runs' staged rows and records their files in the ledger in one transaction. What a one-worker ingest decides across
files is decided here again: a request id is kept from its first copy in that ingest's order (landing file order,
then the order within a file; a file is never split across shards), checked against the warehouse too; every later
copy is a duplicate_request_id or request_id_conflict reject naming the first, its rows dropped and its file's counts
corrected. A shard's own decision changes only where a copy outside it came first."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import duckdb
import polars as pl

from citegate_assets.lib.core.durable import fsync_dir, private_dir, replace_durably
from citegate_assets.lib.core.lines import READ_ERRORS, ReadState, open_stream, read_lines
from citegate_assets.lib.ingest.known_requests import KnownRequests
from citegate_assets.lib.ingest.landing import Entry, OutsideLanding, open_entry
from citegate_assets.lib.ingest.ledger import ledger_frame
from citegate_assets.lib.ingest.records import Reject
from citegate_assets.lib.ingest.run_batches import CONFLICT_SCHEMA, REJECT_SCHEMA
from citegate_assets.lib.ingest.shard_staging import CLAIMS, LEDGER, SHARD_RUN, TABLES, Staging
from citegate_assets.lib.ingest.stream import IngestSummary
from citegate_assets.lib.ingest.workers import valid_line_text
from citegate_assets.lib.storage.text_files import TEXT_SCHEMA, write_durably
from citegate_assets.lib.storage.text_store import text_dir
from citegate_assets.lib.storage.warehouse import run_script, transaction

__all__ = ["ShardedSummary", "collect"]

REFUSALS = ("duplicate_request_id", "request_id_conflict")
KEEP_TEXT = (*REFUSALS, "unprocessable_record")  # as ingest does: only a parse reject's text is dropped on forget


@dataclass
class ShardedSummary(IngestSummary):
    shards: int = 0
    moved_to_rejects: int = 0  # copies a shard kept that a copy elsewhere (first in file order) outranked


def collect(
    con: duckdb.DuckDBPyConnection,
    stage: Staging,
    runs: list[str],
    order: dict[str, int],
    now: datetime,
    landing: Path | None = None,
    max_line_bytes: int = 1 << 25,
) -> ShardedSummary:
    """The marked shard runs among `runs` into the warehouse, and their files into the ledger, in one transaction;
    a request id claimed in more than one shard (or already in the warehouse) resolved as one ingest would.
    order: each landing file's place in the one-worker ingest's order; landing: where a refused copy's line is
    read again for its reject row."""
    markers = stage.markers()
    marked = [r for r in runs if r in set(markers[SHARD_RUN].to_list())]
    frames = {rel: stage.read(rel, marked) for rel in TABLES}
    claims = stage.read(CLAIMS, marked)
    ledger = stage.read(LEDGER, marked)
    summary = ShardedSummary()
    # the prompts keep their shard run until their text files are placed
    data = {
        rel: (frame.drop(SHARD_RUN) if frame is not None and rel != "batch_prompts" else frame)
        for rel, frame in frames.items()
    }
    ledger_rows = ledger.drop(SHARD_RUN).to_dicts() if ledger is not None else []
    by_file: dict[str, dict] = {row["file_name"]: row for row in ledger_rows}
    if claims is not None and claims.height:
        data, summary.moved_to_rejects = _resolve(
            con, data, frames, claims, by_file, order, now, lambda wanted: _read_lines(landing, wanted, max_line_bytes)
        )
    staged, kept = frames["batch_prompts"], data["batch_prompts"]
    if staged is not None and kept is not None:
        with tempfile.TemporaryDirectory(prefix="citegate-collect-") as work:
            data["batch_prompts"] = _place_text(stage, text_dir(con), staged, kept, Path(work))
    for rel in TABLES:
        frame = data[rel]
        if rel == "batch_prompts" and frame is not None:
            summary.records_ingested = frame.height
            summary.days.update(frame["day"].unique().to_list())
        if rel == "batch_rejects" and frame is not None:
            summary.records_rejected = frame.filter(pl.col("line_no") > 0).height
        if rel == "batch_answer_rejects" and frame is not None:
            summary.answers_rejected = frame.height
    with transaction(con):
        registered = []
        try:
            for rel in TABLES:
                frame = data[rel]
                if frame is None:
                    frame = _empty(con, rel)
                con.register(rel, frame.to_arrow())
                registered.append(rel)
            run_script(con, "ingest/insert_batch")
            con.register("batch_ledger", ledger_frame(ledger_rows).to_arrow())
            registered.append("batch_ledger")
            run_script(con, "ingest/ledger_upsert")
        finally:
            for rel in registered:
                con.unregister(rel)
    return summary


TABLE_OF = {
    "batch_prompts": "prompt_rows",
    "batch_sections": "prompt_sections",
    "batch_retrievals": "retrievals",
    "batch_citations": "citations",
    "batch_answer_rejects": "answer_rejects",
    "batch_rejects": "ingest_rejects",
    "batch_conflicts": "prompt_conflicts",
    "batch_source_lines": "request_source_lines",
}


def _empty(con: duckdb.DuckDBPyConnection, rel: str) -> pl.DataFrame:
    return con.sql(f"select * from {TABLE_OF[rel]} limit 0").pl()  # noqa: S608 - a fixed table name


def _place_text(
    stage: Staging, folder: Path | None, staged: pl.DataFrame, kept: pl.DataFrame, work: Path
) -> pl.DataFrame:
    """The kept prompts' text files, as the shards' parse steps wrote them, put in the warehouse's text folder
    (renamed when they are on its filesystem, else copied; fsynced before the transaction that names them); a file
    that also holds a copy refused here is written again with the kept rows only, so a refused copy's text is in no
    file. folder None (an in-memory warehouse): the text inline, as ingest keeps it there."""
    out = []
    for (run, name), rows in kept.group_by(SHARD_RUN, "text_file", maintain_order=True):
        if name is None:
            out.append(rows)
            continue
        source = stage.text_file(str(run), str(name), work)
        whole = staged.filter((pl.col(SHARD_RUN) == run) & (pl.col("text_file") == name)).height == rows.height
        if folder is None:
            text = pl.read_parquet(source).select(*TEXT_SCHEMA)
            out.append(
                rows.drop("prompt_raw", "prompt_normalized")
                .join(text, on="request_id", how="left")
                .with_columns(text_file=pl.lit(None, pl.String))
            )
            continue
        if whole:
            _put(source, folder / str(name))
        else:
            text = pl.read_parquet(source).filter(pl.col("request_id").is_in(rows["request_id"].implode()))
            write_durably(text.select(*TEXT_SCHEMA), folder / str(name))
        out.append(rows)
    placed = pl.concat(out, how="diagonal_relaxed") if out else kept
    return placed.drop(SHARD_RUN).select([c for c in kept.columns if c != SHARD_RUN])


def _put(source: Path, target: Path) -> None:
    """A staged text file in place, durably: renamed on the same filesystem, else copied first."""
    private_dir(target.parent)
    try:
        os.replace(source, target)
        fsync_dir(target.parent)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(source, tmp)
        replace_durably(tmp, target)


def _read_lines(landing: Path | None, wanted: set[tuple[str, int]], max_line_bytes: int) -> dict[tuple[str, int], str]:
    """The text of these (file, line number) of the landing folder, as a reject row keeps a valid record's line:
    one read of each file up to its last wanted line. A file gone since (rotated away) gives no text."""
    found: dict[tuple[str, int], str] = {}
    if landing is None:
        return found
    by_file: dict[str, set[int]] = {}
    for name, no in wanted:
        by_file.setdefault(name, set()).add(no)
    for name, numbers in sorted(by_file.items()):
        entry = Entry(name, landing / name)
        try:
            with open_entry(landing, entry) as (fh, _st):
                last = max(numbers)
                for line in read_lines(
                    open_stream(fh, entry.compressed), ReadState(), max_line_bytes=max_line_bytes, final=True
                ):
                    if line.no in numbers:
                        found[(name, line.no)] = valid_line_text(line)
                    if line.no >= last:
                        break
        except (*READ_ERRORS, OSError, OutsideLanding):
            continue
    return found


def _resolve(
    con: duckdb.DuckDBPyConnection,
    data: dict[str, pl.DataFrame | None],
    frames: dict[str, pl.DataFrame | None],
    claims: pl.DataFrame,
    by_file: dict[str, dict],
    order: dict[str, int],
    now: datetime,
    lines_of: Callable[[set[tuple[str, int]]], dict[tuple[str, int], str]],
) -> tuple[dict[str, pl.DataFrame | None], int]:
    """Each request id's first copy in file order wins, against the warehouse too; a shard's decision is corrected
    only where a copy outside it came first."""
    known = KnownRequests(con)
    per_rid = claims.group_by("request_id").agg(pl.col(SHARD_RUN).n_unique().alias("runs"))
    in_warehouse = {
        rid: (sha, source, removed)
        for rid, sha, source, removed in known.lookup(claims["request_id"].unique().to_list())
    }
    crossing = set(per_rid.filter(pl.col("runs") > 1)["request_id"].to_list()) | set(in_warehouse)
    forgotten = known.forgotten(
        [r for r in (data["batch_rejects"]["request_id"].to_list() if data["batch_rejects"] is not None else []) if r]
    )
    rejects = data["batch_rejects"] if data["batch_rejects"] is not None else pl.DataFrame(schema=REJECT_SCHEMA)
    conflicts = data["batch_conflicts"] if data["batch_conflicts"] is not None else pl.DataFrame(schema=CONFLICT_SCHEMA)
    if forgotten:  # a parse reject of a forgotten request keeps no text (the refusals are decided below)
        rejects = rejects.with_columns(
            raw_line=pl.when(pl.col("request_id").is_in(sorted(forgotten)) & ~pl.col("reason").is_in(KEEP_TEXT))
            .then(None)
            .otherwise(pl.col("raw_line"))
        )
    if not crossing:
        data["batch_rejects"] = rejects
        return data, 0
    involved = (
        claims.filter(pl.col("request_id").is_in(sorted(crossing)))
        .with_columns(file_order=pl.col("source_file").replace_strict(order, default=len(order), return_dtype=pl.Int64))
        .sort("file_order", "line_no", "seq")
    )
    seen: dict[str, tuple[str, str, bool]] = dict(in_warehouse)
    drop: list[tuple[str, str]] = []  # (shard run, request id) of a kept copy now refused
    new_rejects: list[dict] = []
    refused_kept: list[bool] = []  # per new reject: a copy a shard kept, with its text to keep
    new_conflicts: list[dict] = []
    redo: list[tuple[str, int]] = []  # (file, line) of a shard's refusal decided again
    # (file, line, request id) of a first copy whose frames failed in its shard, refused here: as one ingest does,
    # its reject is the refusal, not unprocessable_record
    unbroken: list[tuple[str, int, str]] = []
    answers_dropped: Counter[str] = Counter()
    for c in involved.iter_rows(named=True):
        rid = c["request_id"]
        prior = seen.get(rid)
        if prior is None:
            seen[rid] = (c["prompt_sha256"], f"{c['source_file']}:{c['line_no']}", False)
            continue
        sha, source, removed = prior
        if sha == c["prompt_sha256"]:
            why = Reject(
                "duplicate_request_id", f"request_id {rid!r} already ingested from {source} with the same prompt"
            )
        else:
            why = Reject(
                "request_id_conflict",
                f"request_id {rid!r} already ingested from {source} with a different prompt; the first is kept",
            )
            new_conflicts.append(
                {
                    "request_id": rid,
                    "day": c["day"],
                    "existing_sha256": sha,
                    "conflicting_sha256": c["prompt_sha256"],
                    "existing_source": source,
                    "source_file": c["source_file"],
                    "source_line": c["line_no"],
                    "recorded_at": now,
                }
            )
        if c["kept"] and c["broken"]:
            unbroken.append((c["source_file"], c["line_no"], rid))  # a reject either way: its counts stand
        elif c["kept"]:
            drop.append((c[SHARD_RUN], rid))
            row = by_file.get(c["source_file"])
            if row is not None:
                row["records_ingested"] -= 1
                row["records_rejected"] += 1
        else:
            redo.append((c["source_file"], c["line_no"]))
        new_rejects.append(
            {
                "source_file": c["source_file"],
                "line_no": c["line_no"],
                "day": c["day"],
                "request_id": rid,
                "reason": why.reason,
                "detail": why.detail,
                "raw_line": None if removed else c["raw_line"],
                "rejected_at": now,
            }
        )
        refused_kept.append(bool(c["kept"]) and not c["broken"] and not removed)
    # a log line a shard kept and a copy elsewhere outranked: its reject row keeps the line, read again
    again = [r for r, keeps in zip(new_rejects, refused_kept) if keeps and r["raw_line"] is None]
    if again:
        text = lines_of({(r["source_file"], r["line_no"]) for r in again})
        for r in again:
            r["raw_line"] = text.get((r["source_file"], r["line_no"]))
    if unbroken:
        spots = pl.DataFrame(
            unbroken, schema={"source_file": pl.String, "line_no": pl.Int64, "request_id": pl.String}, orient="row"
        ).with_columns(reason=pl.lit("unprocessable_record"))
        keys = ["source_file", "line_no", "request_id", "reason"]
        texts = {
            (r["source_file"], r["line_no"], r["request_id"]): r["raw_line"]
            for r in rejects.join(spots, on=keys, how="semi").iter_rows(named=True)
        }
        for r in new_rejects:
            key = (r["source_file"], r["line_no"], r["request_id"])
            if key in texts and not seen[r["request_id"]][2]:
                r["raw_line"] = texts[key]
        rejects = rejects.join(spots, on=keys, how="anti")
    redo_frame = pl.DataFrame(redo, schema={"source_file": pl.String, "line_no": pl.Int64}, orient="row")
    # the shard's own refusals decided again: their raw line kept from the shard's row
    if redo:
        old = rejects.join(redo_frame, on=["source_file", "line_no"], how="semi").filter(
            pl.col("reason").is_in(REFUSALS)
        )
        raw = {(r["source_file"], r["line_no"], r["request_id"]): r["raw_line"] for r in old.iter_rows(named=True)}
        for r in new_rejects:
            key = (r["source_file"], r["line_no"], r["request_id"])
            if key in raw:
                removed = seen[r["request_id"]][2]
                r["raw_line"] = None if removed else raw[key]
        rejects = (
            rejects.join(redo_frame.with_columns(redone=pl.lit(True)), on=["source_file", "line_no"], how="left")
            .filter(~(pl.col("redone").fill_null(False) & pl.col("reason").is_in(REFUSALS)))
            .drop("redone")
        )
        conflicts = conflicts.join(
            redo_frame.rename({"line_no": "source_line"}), on=["source_file", "source_line"], how="anti"
        )
    rejects = pl.concat([rejects, pl.DataFrame(new_rejects, schema=REJECT_SCHEMA)], how="diagonal_relaxed")
    conflicts = pl.concat([conflicts, pl.DataFrame(new_conflicts, schema=CONFLICT_SCHEMA)], how="diagonal_relaxed")
    data["batch_rejects"] = rejects.select(list(REJECT_SCHEMA))
    data["batch_conflicts"] = conflicts.select(list(CONFLICT_SCHEMA))
    if drop:
        gone = pl.DataFrame(drop, schema={SHARD_RUN: pl.String, "request_id": pl.String}, orient="row")
        answers = frames["batch_answer_rejects"]
        if answers is not None:
            for row in answers.join(gone, on=[SHARD_RUN, "request_id"], how="semi").iter_rows(named=True):
                answers_dropped[row["source_file"]] += 1
        for rel in ("batch_prompts", "batch_sections", "batch_retrievals", "batch_citations", "batch_answer_rejects"):
            frame = frames[rel]
            if frame is not None:
                kept = frame.join(gone, on=[SHARD_RUN, "request_id"], how="anti")
                data[rel] = kept if rel == "batch_prompts" else kept.drop(SHARD_RUN)
        lines = frames["batch_source_lines"]
        if lines is not None:
            data["batch_source_lines"] = lines.join(gone, on=[SHARD_RUN, "request_id"], how="anti").drop(SHARD_RUN)
        kept_days = _kept_days(claims, gone)
        touched = set(involved.filter(pl.col("kept"))["source_file"].to_list())
        for name in touched & set(by_file):
            row = by_file[name]
            row["answers_rejected"] -= answers_dropped.get(name, 0)
            found = con.execute("select days from ingested_files where file_id = $1", [row["file_id"]]).fetchall()
            before = set(found[0][0] or ()) if found else set()
            row["days"] = sorted(before | kept_days.get(name, set()))
    return data, len(drop)


def _kept_days(claims: pl.DataFrame, gone: pl.DataFrame) -> dict[str, set[date]]:
    kept = claims.filter(pl.col("kept") & ~pl.col("broken")).join(gone, on=[SHARD_RUN, "request_id"], how="anti")
    out: dict[str, set[date]] = {}
    for name, day in kept.select("source_file", "day").unique().iter_rows():
        out.setdefault(name, set()).add(day)
    return out
