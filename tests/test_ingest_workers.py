"""Ingest with parse workers: the same rows in every ingest table as with none, whatever the order the
workers finish in: the first copy of a request id wins, known requests are refused in order, reject rows, ledger
offsets and counts, a partial last line held back and read on the next run."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import pickle
import re
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from citegate_assets.lib.config import ConfigError, parse_config
from citegate_assets.lib.core.lines import Line
from citegate_assets.lib.ingest import shared_lines
from citegate_assets.lib.ingest import workers as ingest_workers
from citegate_assets.lib.ingest.shared_lines import SharedLines, read_shipped, stripped
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.ingest.workers import ParsePool, resolve_workers
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

from .helpers import scenario_record

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TABLES = [
    "prompts",
    "prompt_sections",
    "retrievals",
    "citations",
    "answer_rejects",
    "ingest_rejects",
    "prompt_conflicts",
    "ingested_files",
]


def _record(rid: str, day: str = "2026-11-02", **changes) -> dict:
    record = scenario_record("plain-list", "text", request_id=rid, logged_at=f"{day}T10:00:00Z")
    record.update(changes)
    return record


def _line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False)


def _landing(root: Path) -> tuple[Path, Path, str]:
    """Generated days (malformed lines, a .gz day) and a hand-made file of the cases the order rules decide."""
    landing = root / "landing"
    generate_logs(landing, days=4, requests_per_day=40, seed=11, malformed=True, start_date="2026-11-02")
    assert any(p.suffix == ".gz" for p in landing.iterdir())
    [day1] = [p for p in landing.iterdir() if p.name.startswith("2026-11-02")]
    with gzip.open(day1) if day1.suffix == ".gz" else day1.open("rb") as fh:
        first = json.loads(fh.readline())
    other_prompt = {**first, "prompt": first["prompt"] + " (edited)"}
    lines = [
        _line(first),  # the same request as a generated file: a duplicate across files
        _line(other_prompt),  # the same id, another prompt: a conflict with the generated file's copy
        _line(_record("dup-in-batch")),
        _line(_record("dup-in-batch")),  # a second copy next to the first: refused, naming the first
        _line(_record("dup-in-batch", prompt="another prompt")),  # a third, different: a conflict within the run
        _line(_record("undecodable-then-good", prompt_encoding="json", prompt="{not json")),
        _line(_record("undecodable-then-good")),  # the undecodable copy claimed nothing: this one lands
        '{"request_id": "broken", "logged_at": ',
        "[1, 2]",
        "",
        _line(_record("late", day="2026-11-03")),
    ]
    mixed = landing / "zz-mixed.jsonl"
    mixed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tail = landing / "zz-tail.jsonl"
    tail.write_text(_line(_record("tail-1")) + "\n" + _line(_record("tail-2"))[:40], encoding="utf-8")
    return landing, tail, first["request_id"]


def _rows(path: Path) -> dict[str, list[tuple]]:
    with connect(path, read_only=True) as con:
        return {t: sorted(con.sql(f"select * from {t}").fetchall(), key=repr) for t in TABLES}


def _ingest(warehouse: Path, landing: Path, workers: int, batch_lines: int) -> int:
    """Ingest; the number of parse workers the run used."""
    config = parse_config({"ingest": {"settle_seconds": 3600}}, None)
    with connect(warehouse) as con:
        ensure_schema(con)
        return ingest_landing(con, landing, config, now=NOW, batch_lines=batch_lines, workers=workers).parse_workers


@pytest.fixture
def went_to_workers(monkeypatch) -> list[bool]:
    """Records, per batch submitted, whether it went to a worker process."""
    went: list[bool] = []
    submit = ParsePool.submit

    def recording(self, *args, **kwargs):
        parsed = submit(self, *args, **kwargs)
        went.append(parsed.in_worker)
        return parsed

    monkeypatch.setattr(ParsePool, "submit", recording)
    return went


@pytest.fixture
def spawned(monkeypatch, went_to_workers) -> list[bool]:
    """Workers from the first batch on; records, per batch, whether it went to a worker process."""
    monkeypatch.setattr(ingest_workers, "SPAWN_AFTER_BYTES", 0)
    return went_to_workers


@pytest.mark.parametrize("batch_lines", [7, 2000])  # many small batches in flight at once; one batch for all
def test_two_workers_write_the_same_rows_as_one(tmp_path, spawned, batch_lines):
    landing, tail, first_id = _landing(tmp_path)
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    assert _ingest(one, landing, workers=1, batch_lines=batch_lines) == 0
    assert spawned and not any(spawned)
    spawned.clear()
    assert _ingest(two, landing, workers=2, batch_lines=batch_lines) == 2
    assert spawned and all(spawned)  # each batch parsed in a worker process
    assert batch_lines > 100 or len(spawned) > 10
    first, second = _rows(one), _rows(two)
    for table in TABLES:
        assert first[table] == second[table], table

    # the order rules were exercised, not just an empty agreement
    with connect(two, read_only=True) as con:
        reasons = dict(con.sql("select reason, count(*) from ingest_rejects group by reason").fetchall())
        assert reasons["duplicate_request_id"] >= 2
        conflicted = {r for (r,) in con.sql("select request_id from prompt_conflicts").fetchall()}
        assert {"dup-in-batch", first_id} <= conflicted
        assert reasons["request_id_conflict"] == len(conflicted)
        assert reasons["prompt_undecodable"] == 1
        assert {"invalid_json", "not_an_object", "empty_line"} <= set(reasons)
        [(kept,)] = con.sql("select count(*) from prompts where request_id = 'undecodable-then-good'").fetchall()
        assert kept == 1
        [(detail,)] = con.sql(
            "select detail from ingest_rejects where request_id = 'dup-in-batch' and reason = 'duplicate_request_id'"
        ).fetchall()
        assert "zz-mixed.jsonl:3" in detail
        [(status, consumed, lines)] = con.sql(
            "select status, bytes_consumed, lines_read from ingested_files where file_name = 'zz-tail.jsonl'"
        ).fetchall()
        assert (status, lines) == ("waiting", 1)
        assert consumed == len(_line(_record("tail-1")).encode()) + 1

    # the tail line ends and more lines come: both warehouses read on from the same offsets
    with tail.open("a", encoding="utf-8") as fh:
        fh.write(_line(_record("tail-2"))[40:] + "\n" + _line(_record("tail-3")) + "\n" + _line(_record("tail-1")))
        fh.write("\n")
    _ingest(one, landing, workers=1, batch_lines=batch_lines)
    _ingest(two, landing, workers=2, batch_lines=batch_lines)
    first, second = _rows(one), _rows(two)
    for table in TABLES:
        assert first[table] == second[table], table
    with connect(two, read_only=True) as con:
        got = con.sql("select request_id from prompts where request_id like 'tail-%' order by 1").fetchall()
        assert got == [("tail-1",), ("tail-2",), ("tail-3",)]
        [(status, lines)] = con.sql(
            "select status, lines_read from ingested_files where file_name = 'zz-tail.jsonl'"
        ).fetchall()
        assert (status, lines) == ("complete", 4)


def test_workers_setting_is_validated_and_resolved():
    assert parse_config({"ingest": {"workers": 3}}, None).ingest.workers == 3
    assert parse_config({}, None).ingest.workers == 0
    for bad in (-1, 1.5, "2", True):
        with pytest.raises(ConfigError, match=r"ingest\.workers"):
            parse_config({"ingest": {"workers": bad}}, None)
    assert resolve_workers(1) == 1
    assert resolve_workers(3) == 3
    assert 1 <= resolve_workers(0) <= ingest_workers.MAX_AUTO_WORKERS


def test_small_runs_parse_in_process(tmp_path, monkeypatch):
    """Below SPAWN_AFTER_BYTES nothing is spawned, whatever [ingest] workers says."""
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.jsonl").write_text("\n".join(_line(_record(f"r{i}")) for i in range(30)) + "\n")
    made: list[ParsePool] = []
    init = ParsePool.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(ParsePool, "__init__", recording)
    assert _ingest(tmp_path / "w.duckdb", landing, workers=4, batch_lines=5) == 0
    [pool] = made
    assert pool.workers == 4 and not pool.spawned
    with connect(tmp_path / "w.duckdb", read_only=True) as con:
        assert con.sql("select count(*) from prompts").fetchall() == [(30,)]


def test_a_file_larger_than_the_threshold_is_parsed_in_workers_from_its_first_batch(
    tmp_path, monkeypatch, went_to_workers
):
    """The workers start as soon as a file with more than SPAWN_AFTER_BYTES to read is opened, not after that much
    has been parsed in the ingest process; a file of at most that size starts none."""
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.jsonl").write_text("\n".join(_line(_record(f"r{i}")) for i in range(40)) + "\n")
    size = (landing / "a.jsonl").stat().st_size
    went = went_to_workers
    monkeypatch.setattr(ingest_workers, "SPAWN_AFTER_BYTES", size)  # the whole file: never more than it
    assert _ingest(tmp_path / "small.duckdb", landing, workers=2, batch_lines=10) == 0
    assert len(went) >= 4 and not any(went)
    went.clear()
    monkeypatch.setattr(ingest_workers, "SPAWN_AFTER_BYTES", size - 1)
    assert _ingest(tmp_path / "large.duckdb", landing, workers=2, batch_lines=10) == 2
    assert len(went) >= 4 and all(went)  # the first batch too
    assert _rows(tmp_path / "small.duckdb") == _rows(tmp_path / "large.duckdb")


def test_a_parse_worker_imports_neither_pyarrow_nor_numpy(tmp_path):
    """A parse worker's start is its imports (each worker pays them, every run): N hands its columns to and from
    polars through the Arrow PyCapsule interface, so a worker parses a batch without pyarrow or numpy (~0.2 CPU-s)."""
    import subprocess

    record = scenario_record("plain-list", "json")
    line = json.dumps(record).encode()
    code = (
        "import sys, json; from datetime import datetime, UTC; from pathlib import Path\n"
        "from citegate_assets.lib.config import parse_config\n"
        "from citegate_assets.lib.core.lines import Line\n"
        "from citegate_assets.lib.ingest.workers import BatchLine, parse_batch_to_send\n"
        f"raw = {line!r}\n"
        "lines = [BatchLine(0, ('f', 1), Line(1, raw, len(raw), len(raw)))]\n"
        "parsed = parse_batch_to_send(lines, parse_config({}, None),"
        f" datetime.now(UTC), True, Path({str(tmp_path)!r}))\n"
        "print(json.dumps([len(parsed.claims), parsed.relations['batch_retrievals'].height,"
        " sorted({m.split('.')[0] for m in sys.modules} & {'pyarrow', 'numpy'})]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    claims, retrievals, imported = json.loads(out.stdout)
    assert claims == 1 and retrievals == len(record["retrieved"]) > 0
    assert imported == []


def test_the_nfc_suspect_table_is_this_pythons():
    """normalize.py skips NFC on rows without any code point NFC may change; its stored table must be complete."""
    import unicodedata

    from citegate_assets.lib.ingest.normalize import NFC_SUSPECT_RANGES, UNICODE_VERSION, _hex_range, _nfc_suspects

    if unicodedata.unidata_version != UNICODE_VERSION:
        pytest.skip("another Unicode version: the table is computed at run time")
    assert [_hex_range(part) for part in NFC_SUSPECT_RANGES.split()] == _nfc_suspects()


def test_vectorized_n_equals_plain_n_on_texts_nfc_changes():
    """Rows that need NFC beside rows that do not, in one column: each the same as N on its own (plain Python)."""
    import random

    from citegate_assets.lib.ingest.normalize import normalize_texts
    from citegate_assets.lib.ingest.normalize_plain import FOLD_FROM, normalize_str

    pieces = [
        "plain ascii",
        "caf\u00e9",  # precomposed: NFC already
        "cafe\u0301",  # decomposed: composes
        "e\u00ad\u0301",  # soft hyphen between a letter and its accent: composes after folding
        "e\u200b\u0301",
        "a\u0323\u0302",  # two marks: canonical order
        "a\u0302\u0323",
        "\u1100\u1161\u11a8",  # Hangul jamo L V T: compose by rule
        "\uac00\u11a8",  # LV + T
        "\u212b",  # angstrom sign: a singleton
        "\uf900",  # CJK compatibility ideograph
        "\U0002f800",
        "\u0958",  # excluded from composition
        "\u0344",
        "x\r\n\ry",
        " \u2003lead",
        "\u0301",  # a mark with nothing before it
        *FOLD_FROM,
    ]
    rng = random.Random(16)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) for _ in range(3000)]
    for unescape in ("none", "html"):
        assert normalize_texts(texts, unescape) == [normalize_str(t, unescape) for t in texts]


KILLED_RUN = """
import os, sys
from datetime import datetime
from citegate_assets.lib.ingest import workers as ingest_workers
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

ingest_workers.SPAWN_AFTER_BYTES = 0
batches = 0

def progress(name, lines, nbytes):
    global batches
    batches += 1
    if batches == 4:  # three batches written, the fourth handed to the writer, more parsing in the workers
        os._exit(9)

with connect(sys.argv[1]) as con:
    ensure_schema(con)
    config = parse_config({"ingest": {"settle_seconds": 3600}}, None)
    ingest_landing(con, sys.argv[2], config, now=datetime.fromisoformat(sys.argv[3]), batch_lines=7,
                   workers=2, progress=progress)
"""


def test_a_run_killed_with_workers_in_flight_resumes_to_the_same_rows(tmp_path):
    import subprocess
    import sys

    landing, _, _ = _landing(tmp_path)
    killed, clean = tmp_path / "killed.duckdb", tmp_path / "clean.duckdb"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(killed), str(landing), NOW.isoformat()],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 9, done.stderr
    partial = _rows(killed)
    assert 0 < len(partial["prompts"]) and partial["ingested_files"]
    _ingest(killed, landing, workers=2, batch_lines=7)
    _ingest(clean, landing, workers=1, batch_lines=7)
    resumed, reference = _rows(killed), _rows(clean)
    for table in TABLES:
        assert resumed[table] == reference[table], table


def test_a_worker_that_dies_loses_nothing(tmp_path, monkeypatch):
    """A worker killed mid-run (out of memory, say): its batches, and the rest, are parsed in the ingest process."""
    import os
    import signal

    monkeypatch.setattr(ingest_workers, "SPAWN_AFTER_BYTES", 0)
    submit = ParsePool.submit
    calls: list[bool] = []

    def killing(self, *args, **kwargs):
        parsed = submit(self, *args, **kwargs)
        calls.append(parsed.in_worker)
        if len(calls) == 3 and self._pool is not None:
            victim = next(iter(self._pool._processes.values()))
            os.kill(victim.pid, signal.SIGKILL)
            victim.join(timeout=30)
        return parsed

    monkeypatch.setattr(ParsePool, "submit", killing)
    landing, _, _ = _landing(tmp_path)
    assert _ingest(tmp_path / "killed-worker.duckdb", landing, workers=2, batch_lines=7) == 2
    assert calls[:3] == [True, True, True] and not calls[-1]  # in workers, then in-process once the pool broke
    monkeypatch.setattr(ParsePool, "submit", submit)
    _ingest(tmp_path / "reference.duckdb", landing, workers=1, batch_lines=7)
    got, reference = _rows(tmp_path / "killed-worker.duckdb"), _rows(tmp_path / "reference.duckdb")
    for table in TABLES:
        assert got[table] == reference[table], table


def _spawned_batch(tmp_path: Path, requests: int) -> tuple[ParsePool, list[ingest_workers.BatchLine], int]:
    """A ParsePool with its workers started, and one batch of generated lines (8 KB prompts, judge off)."""
    landing = tmp_path / "landing"
    generate_logs(landing, days=1, requests_per_day=requests, seed=5, malformed=False, prompt_kb=8)
    [path] = [p for p in landing.iterdir() if p.suffix == ".jsonl"]
    raw = [line for line in path.read_bytes().split(b"\n") if line]
    lines = [ingest_workers.BatchLine(k, (path.name, k + 1), Line(k + 1, r, 0, len(r))) for k, r in enumerate(raw)]
    config = parse_config({"surfaces": {"default": {"stakes": "off"}}}, None)
    pool = ParsePool(config, 2, text_folder=tmp_path / "text")
    pool.expect(ingest_workers.SPAWN_AFTER_BYTES + 1)
    return pool, lines, sum(len(r) for r in raw)


def test_a_workers_frames_come_back_holding_only_their_own_rows(tmp_path):
    """A batch's frames are pickled back from a worker at about their own size. The retrieved texts the prompt holds
    are nulled out of batch_retrievals; the column still shared the buffer of every text of the batch, and pickling
    sent all of it back (~10x the frames), at more CPU in the workers and the ingest process than most parsing."""
    pool, lines, nbytes = _spawned_batch(tmp_path, 120)
    try:
        parsed = pool.submit(lines, NOW, nbytes, True)
        assert parsed.in_worker
        result = parsed.result()  # unpickled here: the frames hold exactly the buffers the worker sent
    finally:
        pool.close()
    retrievals = result.relations["batch_retrievals"]
    assert retrievals.height >= 400 and retrievals["text"].null_count() > retrievals.height // 2
    for rel, frame in result.relations.items():
        sent = len(pickle.dumps(frame))
        assert sent <= 2 * frame.estimated_size() + 20_000, (rel, sent, frame.estimated_size())
    reference = ingest_workers.parse_batch(lines, pool.config, NOW, True, tmp_path / "text")
    for rel, frame in result.relations.items():  # the same rows as parsed in this process (bar the files' names)
        assert frame.drop("text_file", strict=False).equals(
            reference.relations[rel].drop("text_file", strict=False), null_equal=True
        ), rel


def test_a_parse_worker_runs_polars_on_one_thread(tmp_path, monkeypatch):
    """The workers are the parallelism: each runs polars on one thread, its allocators keep the pages a batch frees
    (PARSE_PROCESS_ENVIRONMENT, over what `import polars` wrote for jemalloc), what the user set stays, and the ingest
    process's environment is left as it was."""
    for name in ingest_workers.PARSE_PROCESS_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    assert "polars" in sys.modules
    monkeypatch.setenv("_RJEM_MALLOC_CONF", ingest_workers.POLARS_OWN_JEMALLOC_CONF)  # as `import polars` left it
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")  # the user's
    before = dict(os.environ)
    pool, lines, nbytes = _spawned_batch(tmp_path, 10)
    try:
        pool.submit(lines, NOW, nbytes, True).result()
        assert pool._pool is not None
        pids = [p.pid for p in pool._pool._processes.values()]
        assert pids
        for pid in pids:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert b"POLARS_MAX_THREADS=1" in environ
            for name, value in ingest_workers.PARSE_PROCESS_ENVIRONMENT.items():  # its allocators keep their pages
                assert f"{name}={value if name != 'MALLOC_TRIM_THRESHOLD_' else '12345'}".encode() in environ
            names = [(task / "comm").read_text().strip() for task in Path(f"/proc/{pid}/task").iterdir()]
            assert len([n for n in names if re.fullmatch(r"polars-\d+", n)]) == 1, names  # its compute pool
    finally:
        pool.close()
    assert dict(os.environ) == before


def test_a_batch_reaches_its_worker_through_a_shared_region_and_the_region_is_reused(tmp_path):
    """The lines' bytes are copied into a region of shared memory the worker maps, not pickled down the pipe; each
    region serves batch after batch, and closing the pool leaves none open."""
    pool, lines, nbytes = _spawned_batch(tmp_path, 60)
    halves = [lines[:30], lines[30:]]
    try:
        results = []
        for _ in range(3):
            for half in halves:
                parsed = pool.submit(half, NOW, nbytes, True)
                assert parsed.in_worker and parsed._lease is not None
                sent = pickle.dumps(stripped(half))  # what the task carries of its lines
                assert len(sent) < sum(len(bl.line.raw) for bl in half) // 20
                results.append(parsed.result())
        assert len(pool._regions._all) <= 2  # reused, not one per batch
        assert _regions_open() > 0
    finally:
        pool.close()
    assert _regions_open() == 0
    reference = [ingest_workers.parse_batch(half, pool.config, NOW, True, tmp_path / "text") for half in halves]
    for n, result in enumerate(results):
        assert result.claims == reference[n % 2].claims
        for rel, frame in result.relations.items():
            assert frame.drop("text_file", strict=False).equals(
                reference[n % 2].relations[rel].drop("text_file", strict=False), null_equal=True
            ), rel


def test_a_worker_that_cannot_map_the_region_loses_nothing(tmp_path, monkeypatch):
    """A worker that may not open the ingest process's region (a /proc it cannot read): that batch is parsed in the
    ingest process, and the batches after it are pickled to the workers with their bytes."""
    pool, lines, nbytes = _spawned_batch(tmp_path, 40)
    lend = SharedLines.lend

    def unreadable(self, raws):
        lease = lend(self, raws)
        if lease is not None:  # a descriptor the ingest process does not hold
            lease.shipped = dataclasses.replace(lease.shipped, fd=1_000_000)
        return lease

    monkeypatch.setattr(SharedLines, "lend", unreadable)
    try:
        first = pool.submit(lines[:20], NOW, nbytes, True)
        assert first._lease is not None
        got_first = first.result()
        assert not pool._regions.usable
        second = pool.submit(lines[20:], NOW, nbytes, True)
        assert second.in_worker and second._lease is None
        got_second = second.result()
    finally:
        pool.close()
    for got, part in ((got_first, lines[:20]), (got_second, lines[20:])):
        reference = ingest_workers.parse_batch(part, pool.config, NOW, True, tmp_path / "text")
        assert [c.request_id for c in got.claims] == [c.request_id for c in reference.claims]
        assert len(got.claims) == len(part)
        assert got.relations["batch_prompts"].height == reference.relations["batch_prompts"].height


def test_shared_lines_round_trip_in_one_process():
    """The bytes read out of a region are the lines put in, including empty and non-UTF-8 ones; a batch larger
    than every free region gets a larger one."""
    regions = SharedLines()
    if not regions.usable:
        pytest.skip("no memfd here")
    raws = [b"", b'{"a": 1}', "caf\u00e9".encode(), b"\xff\xfe not UTF-8", b"x" * 70_000]
    lines = [ingest_workers.BatchLine(k, ("f.jsonl", k + 1), Line(k + 1, r, 0, len(r))) for k, r in enumerate(raws)]
    try:
        lease = regions.lend(raws)
        assert lease is not None
        back = read_shipped(lease.shipped, stripped(lines))
        assert [bl.line.raw for bl in back] == raws
        assert [(bl.key, bl.origin, bl.line.no, bl.line.length) for bl in back] == [
            (bl.key, bl.origin, bl.line.no, bl.line.length) for bl in lines
        ]
        lease.release()
        again = regions.lend(raws[:2])
        assert again is not None and again.region is lease.region
        again.release()
        bigger = regions.lend([b"y" * (lease.region.size + 1)])
        assert bigger is not None and bigger.region.size > lease.region.size
        assert read_shipped(bigger.shipped, stripped(lines[:1]))[0].line.raw == b"y" * (lease.region.size + 1)
    finally:
        regions.close()
        for mapped in shared_lines._mapped.values():  # what a worker maps stays mapped until it exits
            mapped.close()
        shared_lines._mapped.clear()
    assert _regions_open() == 0


def _regions_open() -> int:
    """The shared regions this process holds open."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd).startswith("/memfd:citegate-batch")
        except OSError:
            pass
    return count


def test_a_worker_keeps_only_its_most_recently_used_mappings():
    """A mapping keeps its region's pages alive after the ingest process replaced it: a worker keeps at most
    _MAPPED_AT_MOST, the most recently used."""
    regions = SharedLines()
    if not regions.usable:
        pytest.skip("no memfd here")
    line = [ingest_workers.BatchLine(0, ("f.jsonl", 1), Line(1, b"x", 0, 1))]
    try:
        leases = [regions.lend([b"x" * (1 << 20) * (n + 1)]) for n in range(shared_lines._MAPPED_AT_MOST + 3)]
        first = leases[0]
        assert first is not None
        for lease in leases:
            assert lease is not None
            read_shipped(lease.shipped, stripped(line))
            read_shipped(first.shipped, stripped(line))  # the first region, used again each time: kept
        assert len(shared_lines._mapped) == shared_lines._MAPPED_AT_MOST
        assert first.shipped.token in shared_lines._mapped
        assert leases[1].shipped.token not in shared_lines._mapped  # the least recently used went first
    finally:
        regions.close()
        for mapped in shared_lines._mapped.values():
            mapped.close()
        shared_lines._mapped.clear()
    assert _regions_open() == 0


class _Finalized:
    """Writes "finalized" to its file when Python's finalization deletes it (everything it needs bound beforehand)."""

    def __init__(self, path: str):
        self.fd, self.write = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), os.write

    def __del__(self):
        self.write(self.fd, b"finalized")


_kept: list[_Finalized] = []


def _keep_a_finalized_object(path: str) -> int:
    _kept.append(_Finalized(path))
    return os.getpid()


def test_a_parse_worker_ends_without_pythons_finalization_and_other_pools_keep_it(tmp_path):
    """A parse worker holds nothing to close (each batch's text file is whole when its task returns): with the pool, it
    ends without collecting and tearing down every object (~0.05 CPU-s each). A day run's process keeps the
    interpreter's own finalization (its DuckDB connection is closed there)."""
    from citegate_assets.lib.core.processes import spawned_pool

    pool, lines, nbytes = _spawned_batch(tmp_path, 10)
    try:
        pool.submit(lines, NOW, nbytes, True).result()  # the batch parsed in a worker
        assert pool._pool is not None
        parse_worker = pool._pool.submit(_keep_a_finalized_object, str(tmp_path / "parse-worker")).result()
    finally:
        pool.close()
    with spawned_pool(1) as other:
        other_worker = other.submit(_keep_a_finalized_object, str(tmp_path / "other-worker")).result()
    assert parse_worker != os.getpid() and other_worker != os.getpid()
    assert (tmp_path / "parse-worker").read_bytes() == b""
    assert (tmp_path / "other-worker").read_bytes() == b"finalized"


def _sigterm_disposition() -> str:
    return signal.getsignal(signal.SIGTERM).name


def test_a_pool_worker_can_be_ended_by_sigterm_whatever_its_parent_ignores(tmp_path):
    """A process started with SIGINT ignored (a background job) that ran Dagster in process has SIGTERM ignored
    (Dagster maps it to SIGINT's handler); a broken pool's shutdown ends its workers with SIGTERM and waited forever
    for one that inherited that."""
    from citegate_assets.lib.core.processes import spawned_pool

    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with spawned_pool(1) as pool:
            assert pool.submit(_sigterm_disposition).result() == "SIG_DFL"
            pid = pool.submit(os.getpid).result()
            os.kill(pid, signal.SIGTERM)
            assert _ended(pid, seconds=30)  # dead (a zombie until the pool reaps it) or reaped already
    finally:
        signal.signal(signal.SIGTERM, before)


def _ended(pid: int, seconds: float) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _results_pipe_size(pool) -> int:
    import fcntl

    return fcntl.fcntl(pool._result_queue._reader.fileno(), fcntl.F_GETPIPE_SZ)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_a_pools_results_come_back_through_a_wide_pipe_whole(tmp_path):
    """The pipe a pool's results come back through is as wide as this kernel lets it be (1 MiB at most, not 64 KiB):
    a parse batch's ~8 MB result crosses it in a few reads. A result far wider than the pipe still arrives whole."""
    from citegate_assets.lib.core.processes import RESULTS_PIPE_BYTES, spawned_pool

    allowed = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    with spawned_pool(1) as pool:
        assert _results_pipe_size(pool) == min(allowed, RESULTS_PIPE_BYTES) > 64 * 1024
        payload = os.urandom(9 * 2**20)
        assert pool.submit(bytes, payload).result() == payload
