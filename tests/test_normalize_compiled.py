"""N's compiled pass (lib/ingest/_canonical.c) gives the polars path's results, text for text."""

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.stages import INGEST_TABLES_CLOCK_FREE
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest import normalize as N
from citegate_assets.lib.ingest.normalize_plain import FOLD_FROM, WHITESPACE
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

FRAMEWORKS = Path(__file__).parent / "fixtures" / "frameworks"
compiled = pytest.mark.skipif(N._compiled is None, reason="no C compiler built lib/ingest/_canonical.c")

# what each branch of the compiled pass meets: every White_Space and look-alike, NFC's suspects (a combining accent, a
# soft hyphen before one, Hangul jamo, U+2000), 2-, 3- and 4-byte code points, controls that are not White_Space
SPECIAL = (
    list(WHITESPACE)
    + FOLD_FROM
    + [
        "e\u0301",
        "\u00ad\u0301",
        "\u1100\u1161",
        "\u2000",
        "\u00e9",
        "\u00fc",
        "\u4e2d",
        "\U0001f600",
        "\x00",
        "\x1c",
        "\r\n",
        "  ",
    ]
)
text = st.lists(st.one_of(st.text(max_size=8), st.sampled_from(SPECIAL)), max_size=40).map("".join)


def both(texts: list[str | None]) -> tuple[list, list]:
    series = pl.Series("t", texts, dtype=pl.String)
    return N._canonical_compiled(series).to_list(), N._canonical_general(series).to_list()


def test_the_compiled_pass_is_built():
    # `make install` builds it; CI tests it rather than the fallback a machine without a compiler runs
    if N._compiled is None and not os.environ.get("CI"):
        pytest.skip("no C compiler built lib/ingest/_canonical.c: N runs on the polars path")
    assert N._compiled is not None


@compiled
@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(st.lists(st.one_of(st.none(), text), min_size=1, max_size=30))
def test_compiled_equals_general_on_any_text(texts):
    fast, general = both(texts)
    assert fast == general


@compiled
def test_known_cases():
    cases = {
        "  A\u2019s \u201cquote\u201d\r\n\u2014 x\u00a0 ": 'A\'s "quote" - x',
        "a \u200b b": "a b",  # a removed character inside a run of whitespace: one space
        "a\u200bb\u00adc": "abc",
        "\u3000\u0085lead and trail\u1680\u2028": "lead and trail",
        "wait\u2026 \U0001f600": "wait... \U0001f600",
        " \t\n ": "",
        "": "",
        "caf\u00e9 e\u0301": "caf\u00e9 \u00e9",  # the second is composed on the general path
        "a\x1cb": "a\x1cb",  # not White_Space: kept
    }
    fast, general = both([*cases, None])
    assert fast == general == [*cases.values(), None]


def canonical(stream_owner, bitmap: bytes | None = None) -> tuple[list[str | None], list[int]]:
    """The compiled pass on a column given as an Arrow C stream (polars' or pyarrow's): each row's text, taken back
    by polars through the Column's capsules, and the suspect rows."""
    column, suspect_rows = N._compiled.canonical_column(
        stream_owner.__arrow_c_stream__(), bitmap or N._suspect_bitmap()
    )
    return pl.Series(column).to_list(), suspect_rows


def raw_column(data: bytes, ends: list[int]):
    """A large_string column holding these bytes whatever they are (pyarrow does not check them here)."""
    pa = pytest.importorskip("pyarrow")
    offsets = pa.py_buffer(b"".join(v.to_bytes(8, "little", signed=True) for v in ends))
    return pa.chunked_array([pa.LargeStringArray.from_buffers(len(ends) - 1, offsets, pa.py_buffer(data))])


@compiled
def test_rows_nfc_may_change_are_listed_and_left_as_they_are():
    texts = ["plain \u2014 text", "e\u0301", "ok", "\u1100\u1161"]
    assert canonical(pl.Series(texts)) == (["plain - text", "e\u0301", "ok", "\u1100\u1161"], [1, 3])


@compiled
def test_every_layout_of_a_string_column_is_read():
    pa = pytest.importorskip("pyarrow")
    texts = [" a\u00a0 b ", None, "x" * 40 + "\u201cy\u201d", "", None, "\u00e9 \t z"]  # none NFC may change
    expected = N._canonical_general(pl.Series(texts)).to_list()
    # polars' own export: string views (short rows inline, long ones in data buffers), sliced, in several chunks
    many = pl.concat([pl.Series(texts), pl.Series(texts)[1:]], rechunk=False)
    assert many.n_chunks() == 2
    assert canonical(many)[0] == N._canonical_general(many).to_list()
    assert canonical(pl.Series(texts)[2:])[0] == expected[2:]
    for kind in (pa.string(), pa.large_string(), pa.string_view()):
        column = pa.chunked_array([pa.array(texts, type=kind), pa.array(texts, type=kind).slice(1)])
        assert canonical(column)[0] == expected + expected[1:], kind
    assert canonical(pl.Series([], dtype=pl.String)) == ([], [])
    assert canonical(pl.Series([None, None], dtype=pl.String)) == ([None, None], [])


@compiled
def test_malformed_columns_are_refused_by_name():
    bitmap = N._suspect_bitmap()
    with pytest.raises(ValueError, match="inside a code point"):
        canonical(raw_column(b"a\xe2\x80", [0, 3]))
    with pytest.raises(ValueError, match="past U\\+10FFFF"):
        canonical(raw_column(b"\xf7\xbf\xbf\xbf", [0, 4]))
    with pytest.raises(ValueError, match="a string column expected, not Arrow format l"):
        canonical(pl.Series([1, 2]))
    with pytest.raises(ValueError, match="bitmap"):
        canonical(pl.Series(["abc"]), bitmap[:-1])
    with pytest.raises(TypeError, match="arrow_array_stream"):  # not a stream capsule
        N._compiled.canonical_column(object(), bitmap)


@compiled
def test_a_column_is_taken_once():
    column, _ = N._compiled.canonical_column(pl.Series(["a  b"]).__arrow_c_stream__(), N._suspect_bitmap())
    assert pl.Series(column).to_list() == ["a b"]
    with pytest.raises(ValueError, match="already taken"):
        column.__arrow_c_array__()
    # a column never taken frees its buffers with itself
    untaken, _ = N._compiled.canonical_column(pl.Series(["x" * 100]).__arrow_c_stream__(), N._suspect_bitmap())
    del untaken


def strings(value) -> list[str]:
    """Every string in a decoded JSON value, a JSON string's own content included."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except ValueError:
            return [value]
        return [value, *strings(inner)] if isinstance(inner, dict | list) else [value]
    return []


@compiled
def test_compiled_equals_general_on_the_recorded_framework_prompts():
    # prompts, chunks and answers as LlamaIndex, LangChain, the Anthropic SDK and vLLM templates rendered and logged
    # them (scripts/render_fixtures.py), and the messages inside the prompts logged as JSON
    texts = [
        s
        for path in sorted(FRAMEWORKS.glob("*.jsonl"))
        for line in path.open(encoding="utf-8")
        for s in strings(json.loads(line))
    ]
    assert sum(len(t) for t in texts) > 100_000
    fast, general = both(texts)
    assert fast == general


def test_an_ingest_on_the_polars_path_writes_the_tables_of_the_compiled_one(tmp_path, monkeypatch):
    """What a machine without a C compiler runs: every ingest table equal, row for row, to the compiled pass's, on
    generated days with every malformed kind and on every recorded framework fixture."""
    landing = tmp_path / "landing"
    generate_logs(landing, days=2, requests_per_day=30, seed=11, malformed=True, start_date="2026-11-02")
    for fixture in FRAMEWORKS.glob("*.jsonl"):
        if fixture.name != "truth.jsonl":
            shutil.copy(fixture, landing / fixture.name)

    def tables(warehouse: Path) -> dict[str, list]:
        with connect(warehouse) as con:
            ensure_schema(con)
            # one process (workers 1): the patched module is the one that parses
            ingest_landing(con, landing, parse_config({}, None), now=NOW, final=True, workers=1)
            return {t: sorted(con.sql(f"select {c} from {t}").fetchall(), key=repr) for t, c in TABLES.items()}

    compiled = tables(tmp_path / "compiled.duckdb")
    monkeypatch.setattr(N, "_compiled", None)
    general = tables(tmp_path / "general.duckdb")
    assert len(compiled["prompts"]) > 60 and compiled["ingest_rejects"]
    assert compiled == general


NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TABLES = {**INGEST_TABLES_CLOCK_FREE, "ingested_files": "* exclude (first_seen_at, finished_at, landing)"}
