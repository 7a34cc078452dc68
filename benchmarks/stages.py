"""One benchmark stage per process, so each peak RSS is its own: `python -m benchmarks.stages NAME ARGS_JSON`.
Prints one JSON line with the figures."""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import time
from datetime import date, timedelta
from pathlib import Path


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ingest(args: dict) -> dict:
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    t0, cpu0 = time.perf_counter(), os.times()
    with connect(args["warehouse"]) as con:
        ensure_schema(con)
        # workers: parse processes (absent: [ingest] workers of the config, auto = one per core)
        summary = ingest_landing(con, args["landing"], load_config(args.get("config")), workers=args.get("workers"))
        con.execute("checkpoint")  # ingest's rows compressed into the file: its cost, whenever DuckDB would run it
        seconds, cpu = time.perf_counter() - t0, os.times()
        peak = peak_rss_mb()  # ingest's, before this stage's own count below reads every prompt's text
        [(prompt_bytes,)] = con.sql("select sum(strlen(prompt_raw)) from prompts").fetchall()
    own_cpu = cpu.user + cpu.system - cpu0.user - cpu0.system
    workers_cpu = cpu.children_user + cpu.children_system - cpu0.children_user - cpu0.children_system
    return {
        "seconds": seconds,
        # CPU seconds of this process (all its threads: the DuckDB writer's included) and of its parse workers:
        # on shared cores they are steadier than wall time
        "cpu_s": own_cpu,
        "workers_cpu_s": workers_cpu,
        # ingest's cost per core: raw prompt per CPU second of every process (the workers are reaped by now)
        "prompt_mb_per_cpu_s": prompt_bytes / 1e6 / (own_cpu + workers_cpu),
        "workers": args.get("workers"),
        "records": summary.records_ingested,
        "raw_prompt_mb": prompt_bytes / 1e6,
        "line_mb": summary.bytes_read / 1e6,
        "prompt_mb_per_s": prompt_bytes / 1e6 / seconds,
        "peak_rss_mb": peak,
        # the largest parse worker's peak (0 when none was spawned): each is a process of its own
        "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def ingest_shards(args: dict) -> dict:
    """Ingest split across args["shards"] shard processes (lib/ingest/shards.py), staged in a lake folder; CPU of every
    process (the shards and their parse workers are reaped by the end)."""
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.ingest.shards import ingest_sharded
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    t0, cpu0 = time.perf_counter(), os.times()
    config = load_config(args.get("config"))
    with connect(args["warehouse"]) as con:
        ensure_schema(con)
        if args["shards"] > 1:
            summary = ingest_sharded(con, args["landing"], config, shards=args["shards"], staging=args["staging"])
        else:
            summary = ingest_landing(con, args["landing"], config)
        seconds, cpu = time.perf_counter() - t0, os.times()
        [(prompt_bytes,)] = con.sql("select sum(strlen(prompt_raw)) from prompts").fetchall()
    total = cpu.user + cpu.system - cpu0.user - cpu0.system
    total += cpu.children_user + cpu.children_system - cpu0.children_user - cpu0.children_system
    return {
        "shards": args["shards"],
        "seconds": seconds,
        "cpu_s": total,
        "records": summary.records_ingested,
        "raw_prompt_mb": prompt_bytes / 1e6,
        "prompt_mb_per_cpu_s": prompt_bytes / 1e6 / total,
        "peak_rss_mb": peak_rss_mb(),
    }


# Each ingest table's columns but those that hold the ingest clock (each run reads its own): two ingests of the same
# files agree on these row for row.
INGEST_TABLES_CLOCK_FREE = {
    "prompts": "* exclude (ingested_at)",
    "prompt_sections": "*",
    "retrievals": "*",
    "citations": "*",
    "answer_rejects": "* exclude (rejected_at)",
    "ingest_rejects": "* exclude (rejected_at)",
    "prompt_conflicts": "* exclude (recorded_at)",
    "request_source_lines": "*",
    "ingested_files": "* exclude (first_seen_at, finished_at)",
}


def same_tables(args: dict) -> dict:
    """Each ingest table of two warehouses as a multiset of rows (count and the sum of the rows' hashes; the prompts
    view, which names no text file; the ingest clock aside): equal when a sharded ingest wrote what one ingest
    writes."""
    from citegate_assets.lib.storage.warehouse import connect

    tables = INGEST_TABLES_CLOCK_FREE

    def digest(path: str) -> dict[str, tuple]:
        with connect(path, read_only=True) as con:
            out = {}
            for table, cols in tables.items():
                [row] = con.sql(
                    f"select count(*), sum(hash(q)::hugeint)::varchar from (select {cols} from {table}) q"
                ).fetchall()
                out[table] = row
            return out

    a, b = digest(args["a"]), digest(args["b"])
    differ = sorted(t for t in tables if a[t] != b[t])
    return {"tables_differing": differ, "identical": not differ, "rows": {t: a[t][0] for t in tables}}


def parse(args: dict) -> dict:
    """Ingest's parse workers' work alone (parse_batch on batches of 1,000 lines, no DuckDB, one process): raw prompt
    MB per CPU second. Ingest cannot go faster than cores x this, whatever the writer does."""
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.core.lines import Line
    from citegate_assets.lib.core.timestamps import utc_now
    from citegate_assets.lib.ingest.records import parse_raw_line
    from citegate_assets.lib.ingest.workers import BatchLine, parse_batch

    config = load_config(args.get("config"))
    path = sorted(p for p in Path(args["landing"]).iterdir() if p.suffix == ".jsonl")[0]
    raw = [r for r in path.read_bytes().split(b"\n")[: int(args.get("lines", 3000))] if r]
    now = utc_now()
    prompt_bytes = 0
    for i, r in enumerate(raw):  # what prompts.prompt_raw holds, as the ingest stage counts it
        rec, _ = parse_raw_line(Line(i + 1, r, 0, len(r)), now, config.ingest.max_line_bytes)
        prompt_bytes += len(getattr(rec, "prompt", "") or "")
    batches = [
        [
            BatchLine(k, (path.name, k + 1), Line(k + 1, raw[k], 0, len(raw[k])))
            for k in range(i, min(i + 1000, len(raw)))
        ]
        for i in range(0, len(raw), 1000)
    ]
    parse_batch(batches[0][:50], config, now)  # imports and caches warm
    t0, cpu0 = time.perf_counter(), time.process_time()
    for batch in batches:
        parse_batch(batch, config, now)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "raw_prompt_mb": prompt_bytes / 1e6,
        "prompt_mb_per_cpu_s": prompt_bytes / 1e6 / cpu,
    }


def provenance(args: dict) -> dict:
    from citegate_assets.lib.provenance.gate import check_provenance
    from citegate_assets.lib.storage.warehouse import connect

    with connect(args["warehouse"]) as con:
        [(start, end)] = con.sql("select min(day), max(day) from citations").fetchall()
        t0 = time.perf_counter()
        n = check_provenance(con, start, end + timedelta(days=1))
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "citations": n, "citations_per_s": n / seconds, "peak_rss_mb": peak_rss_mb()}


def bare_scan(args: dict) -> dict:
    """The same spans searched in the prompts already normalized, with nothing else (same engine as the gate)."""
    from citegate_assets.lib.storage.warehouse import connect

    with connect(args["warehouse"], read_only=True) as con:
        t0 = time.perf_counter()
        [(n, found)] = con.sql(
            "select count(*), count(*) filter (where contains(p.prompt_normalized, c.span_normalized)) "
            "from citations c join prompts p on p.request_id = c.request_id"
        ).fetchall()
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "citations": n, "found": found, "citations_per_s": n / seconds}


def reference(args: dict) -> dict:
    """The seed's way on a random sample (it is too slow for the whole day), and verdict equality with the gate."""
    from benchmarks.reference import reference_reason
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.loggen import SURFACES
    from citegate_assets.lib.storage.warehouse import connect

    config = load_config(args.get("config"))
    # the seed's method needs the template's patterns: the one the generator rendered each surface with
    rendered_with = {s.name: s.template for s in SURFACES}
    with connect(args["warehouse"], read_only=True) as con:
        ids = [r for (r,) in con.sql("select citation_id from provenance_results order by citation_id").fetchall()]
        sample = sorted(random.Random(7).sample(ids, min(args["sample"], len(ids))))
        con.register("sample_ids", __import__("polars").DataFrame({"citation_id": sample}).to_arrow())
        rows = con.sql(
            """
            select c.citation_id, p.prompt_raw, p.prompt_encoding, p.template, p.surface, c.chunk_id, c.span,
                r.reason, c.request_id
            from sample_ids s join citations c using (citation_id) join prompts p on p.request_id = c.request_id
            join provenance_results r on r.citation_id = c.citation_id
            """
        ).fetchall()
        retrieved: dict[str, dict[str, str]] = {}
        for rid, chunk_id, text in con.sql(
            # a retrieved text stored once, where it stands in the prompt verbatim (schema 11) or as the body of a
            # JSON string (schema 13: raw_encoding 'json'); docs/warehouse.md
            "select r.request_id, r.chunk_id, coalesce(r.text, case when r.raw_encoding = 'json' "
            "then json_extract_string('\"' || substr(p.prompt_raw, r.raw_start + 1, r.raw_end - r.raw_start) "
            "|| '\"', '$') else substr(p.prompt_raw, r.raw_start + 1, r.raw_end - r.raw_start) end) "
            "from retrievals r join prompts p on p.request_id = r.request_id "
            "where r.request_id in "
            "(select request_id from citations where citation_id in (select citation_id from sample_ids))"
        ).fetchall():
            retrieved.setdefault(rid, {})[chunk_id] = text
    t0 = time.perf_counter()
    mismatches = []
    for citation_id, prompt, encoding, template, surface, chunk_id, span, fast_reason, rid in rows:
        profile = config.profile(rendered_with[surface] if template in (None, "auto") else template)
        ref = reference_reason(prompt, encoding, profile, retrieved.get(rid, {}), chunk_id, span)
        if ref != fast_reason:
            mismatches.append((citation_id, ref, fast_reason))
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "citations": len(rows),
        "citations_per_s": len(rows) / seconds,
        "verdict_mismatches": len(mismatches),
        "mismatch_examples": mismatches[:5],
    }


def nightly(args: dict) -> dict:
    """The nightly job for one day partition (ingest → provenance → support → queue → metrics → publish), judge off."""
    import os

    os.environ["DAGSTER_HOME"] = args["dagster_home"]
    from citegate_assets.pipeline import RunPlan, run_range

    day = date.fromisoformat(args["day"])
    t0 = time.perf_counter()
    result = run_range(
        RunPlan(day, day),
        landing=Path(args["landing"]),
        warehouse=Path(args["warehouse"]),
        config_file=Path(args["config"]),
        log_level="ERROR",
    )
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "success": result.success, "peak_rss_mb": peak_rss_mb()}


def judge(args: dict) -> dict:
    """The judge runner against a local OpenAI-compatible server with injected latency; then a cached re-run."""
    from contextlib import contextmanager

    import polars as pl

    from citegate_assets.lib.storage.warehouse import connect, ensure_schema
    from citegate_assets.lib.support.judge.openai_judge import JudgeSettings, OpenAIJudge
    from citegate_assets.lib.support.judging import judge_items
    from tests.judge_server import Reply, ScriptedJudgeServer

    n, latency, concurrency = args["calls"], args["latency_s"], args["concurrency"]
    items = pl.DataFrame(
        {
            "item_id": [f"i{i}" for i in range(n)],
            "passage": [f"Passage {i}." for i in range(n)],
            "claim": [f"Claim {i}." for i in range(n)],
        }
    )

    @contextmanager
    def connect_db():
        with connect(args["warehouse"]) as con:
            ensure_schema(con)
            yield con

    with ScriptedJudgeServer(lambda req, i: Reply("yes", delay_s=latency)) as server:
        judge_ = OpenAIJudge(
            JudgeSettings(base_url=server.base_url, model="bench-judge", concurrency=concurrency, timeout_s=30)
        )
        t0 = time.perf_counter()
        _, facts = judge_items(connect_db, items, judge_, {})
        seconds = time.perf_counter() - t0
        calls_first = len(server.requests)
        _, again = judge_items(connect_db, items, judge_, {})
        calls_second = len(server.requests) - calls_first
        in_flight = server.max_in_flight
    return {
        "seconds": seconds,
        "calls": facts["judge_calls"],
        "calls_per_s": facts["judge_calls"] / seconds,
        "ideal_calls_per_s": concurrency / latency,
        "rerun_calls": calls_second,
        "max_in_flight": in_flight,
        "errors": facts["errors"],
    }


def small_files(args: dict) -> dict:
    """Many one-line files (log shippers that write a file per request): ingest, then a re-run that reads nothing."""
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.loggen import generate_logs
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    landing, n = Path(args["landing"]), int(args["files"])
    if not landing.exists():
        source = landing.with_name(landing.name + "-source")
        generate_logs(source, days=1, requests_per_day=n, seed=5, malformed=False)
        lines = [x for f in sorted(source.glob("*.jsonl")) for x in f.read_bytes().splitlines(keepends=True)]
        landing.mkdir(parents=True)
        for i, line in enumerate(lines[:n]):
            (landing / f"req-{i:06d}.jsonl").write_bytes(line)
    config = load_config(args.get("config"))
    with connect(args["warehouse"]) as con:
        ensure_schema(con)
        t0 = time.perf_counter()
        summary = ingest_landing(con, landing, config, final=True)
        seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        again = ingest_landing(con, landing, config, final=True)
        rerun = time.perf_counter() - t1
    return {
        "seconds": seconds,
        "files": summary.files_seen,
        "records": summary.records_ingested,
        "rerun_seconds": rerun,
        "rerun_lines": again.lines_read,
        "peak_rss_mb": peak_rss_mb(),
    }


def guard(args: dict) -> dict:
    """The call-time guard on a ~15 KB prompt with 8 chunks: check_prompt, then check_citations for 3 citations."""
    from citegate_assets.guard import check_citations, check_prompt

    rng = random.Random(3)
    words = "refund invoice plan seat region audit backup retention encryption policy support tier month annual".split()
    chunks = [
        {
            "chunk_id": f"kb-{i}#c1",
            "rank": i + 1,
            "text": " ".join(rng.choice(words) for _ in range(300)) + f" Fact {i}: {i * 7}% of seats.",
        }
        for i in range(8)
    ]
    prompt = (
        "You answer from the context only.\n\nContext:\n"
        + "\n".join(f"[{c['chunk_id']}] {c['text']}" for c in chunks)
        + "\n\nQuestion: what share of seats?\nAnswer:"
    )
    cites = [
        {"chunk_id": f"kb-{i}#c1", "span": f"Fact {i}: {i * 7}% of seats.", "claim": f"{i * 7}% of seats."}
        for i in (1, 4, 6)
    ]
    calls = int(args.get("calls", 10_000))
    times = []
    for n in range(calls):
        sent = f"{prompt} (request {n})"  # every call a new prompt: nothing carries over but within one call
        t0 = time.perf_counter()
        check_prompt(sent, chunks)
        result = check_citations(sent, chunks, cites)
        times.append(time.perf_counter() - t0)
    assert result.ok, result.failures
    times.sort()
    return {
        "prompt_kb": len(prompt.encode()) / 1024,
        "calls": calls,
        "p50_ms": times[len(times) // 2] * 1e3,
        "p99_ms": times[int(len(times) * 0.99)] * 1e3,
        "peak_rss_mb": peak_rss_mb(),
    }


def offline_judge(args: dict) -> dict:
    """The screen and lexical-v3 on the same pairs in one process: ms per pair and pairs per second, each pass
    from cold caches (every passage and claim read anew), best of `repeats` passes."""
    from citegate_assets.lib.support.judge import heuristic, lexical, screen

    path = Path(__file__).resolve().parents[1] / "labels" / "demo-labels.jsonl"
    pairs = [(r["passage"], r["claim"]) for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())]
    caches = (heuristic.read_passage, heuristic.claim_parts, lexical._passage_side, lexical._claim_side)
    out: dict = {"pairs": len(pairs)}
    judges = {"screen": screen.screen_verdict, "lexical": lexical.lexical_verdict}
    for name, verdict_of in judges.items():
        verdict_of(*pairs[0])  # the weights are loaded once per process, not per pass
        best = float("inf")
        for _ in range(int(args.get("repeats", 5))):
            for cache in caches:
                cache.cache_clear()
            t0 = time.perf_counter()
            for passage, claim in pairs:
                verdict_of(passage, claim)
            best = min(best, time.perf_counter() - t0)
        out[f"{name}_ms_per_pair"] = best * 1e3 / len(pairs)
        out[f"{name}_pairs_per_s"] = len(pairs) / best
    return out


def markers(args: dict) -> dict:
    """Inline markers and span-less citations, in citations per second: reading the answers' markers
    (lib/ingest/markers.py), anchoring their claims (lib/ingest/anchors.py), and the ingest's batch path on the same
    calls with
    marker answers against their structured citations. The calls are generated demo logs (args: landing, their
    first `calls` lines); each answer is its citations' claims, each followed by the cited chunk as a marker: its
    id (`[kb-3#c2]`) on even calls, its rank (`[3]`) on odd ones."""
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.core.timestamps import utc_now
    from citegate_assets.lib.ingest.anchors import Stretch, anchor_in_prompt, anchor_sentence
    from citegate_assets.lib.ingest.batch import frames_of_records
    from citegate_assets.lib.ingest.citation_rows import marker_refs
    from citegate_assets.lib.ingest.markers import read_markers
    from citegate_assets.lib.ingest.normalize_plain import normalize_str
    from citegate_assets.lib.ingest.records import Record, parse_line

    config = load_config(args.get("config"))
    now = utc_now()
    path = sorted(p for p in Path(args["landing"]).iterdir() if p.suffix == ".jsonl")[0]
    structured, marked = [], []
    with path.open(encoding="utf-8") as fh:
        head = [line for _, line in zip(range(int(args.get("calls", 2000))), fh)]
    for n, raw in enumerate(head):
        rec = parse_line(raw, now)
        if not isinstance(rec, Record) or not rec.citations:
            continue
        ranks = {r["chunk_id"]: str(r["rank"]) for r in rec.retrieved}
        refs = [c["chunk_id"] if n % 2 == 0 else ranks.get(c["chunk_id"], "99") for c in rec.citations]
        answer = " ".join(f"{c['claim'].rstrip('.')} [{ref}]." for c, ref in zip(rec.citations, refs))
        structured.append(rec)
        marked.append(Record(**{**rec.__dict__, "citations": [], "answer": answer}))
    # reading: the answers' markers, resolved against each call's retrieved chunks (normalized, as ingest has them)
    calls = [(rec, [normalize_str(r["text"], "none") for r in rec.retrieved]) for rec in marked]
    t0 = time.perf_counter()
    found = 0
    for rec, texts in calls:
        found += len(read_markers(rec.answer or "", marker_refs([], rec.retrieved), chunk_texts=texts))
    read_s = time.perf_counter() - t0
    # anchoring: each structured citation's claim in its chunk, placed in a prompt that holds the chunk whole
    pairs = [
        (normalize_str(c["claim"], "none"), normalize_str(text, "none"))
        for rec in structured
        for c in rec.citations
        if (text := next((r["text"] for r in rec.retrieved if r["chunk_id"] == c["chunk_id"]), None)) is not None
    ]
    t0 = time.perf_counter()
    anchored = 0
    for claim, text in pairs:
        at = anchor_sentence(claim, text)
        if at is not None:
            anchored += anchor_in_prompt(claim, at, text, text, [Stretch(0, len(text), 0, len(text))]) is not None
    anchor_s = time.perf_counter() - t0

    def batch(records: list) -> tuple[float, int]:
        items = list(enumerate(records))
        origin = {k: (path.name, k + 1) for k, _ in items}
        frames_of_records(items[:50], config, origin, now)  # imports and caches warm
        start = time.perf_counter()
        frames, _ = frames_of_records(items, config, origin, now)
        return time.perf_counter() - start, frames.citations.height

    structured_s, structured_n = batch(structured)
    marked_s, marked_n = batch(marked)
    return {
        "calls": len(marked),
        "markers_read": found,
        "read_citations_per_s": found / read_s,
        "anchored_citations": len(pairs),
        "anchors_found": anchored,
        "anchor_citations_per_s": len(pairs) / anchor_s,
        "ingest_structured_citations_per_s": structured_n / structured_s,
        "ingest_marker_citations": marked_n,
        "ingest_marker_citations_per_s": marked_n / marked_s,
        "peak_rss_mb": peak_rss_mb(),
    }


STAGES = {
    f.__name__: f
    for f in (
        ingest,
        ingest_shards,
        same_tables,
        parse,
        provenance,
        bare_scan,
        reference,
        nightly,
        judge,
        offline_judge,
        small_files,
        guard,
        markers,
    )
}

if __name__ == "__main__":
    name, raw = sys.argv[1], sys.argv[2]
    print(json.dumps(STAGES[name](json.loads(raw)), default=str))
