"""lib/provenance/passages.py: the cited passages cut from one streamed read of the prompts are exactly what the join
that
carried the prompt text in DuckDB returned (the reference query below), sampled or not, text removed or not."""

from datetime import date

import polars as pl

from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.provenance import passages as passages_module
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.provenance.passages import PASSAGE_SCHEMA, cited_passages
from citegate_assets.lib.storage.warehouse import connect, ensure_schema, transaction
from citegate_assets.lib.support.sampling import select_sample

START, END = date(2026, 11, 2), date(2026, 11, 5)
REFERENCE = """
select r.citation_id, r.request_id, r.day, r.surface, c.answer_model, c.claim_normalized as claim,
    substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start) as passage,
    coalesce(ss.selected, false) as selected
from provenance_results r
join citations c on c.citation_id = r.citation_id
join prompts p on p.request_id = r.request_id
join prompt_sections s on s.request_id = r.request_id and s.chunk_id = r.chunk_id
   and r.found_start >= s.body_start and r.found_end <= s.body_end
left join support_sample ss on ss.citation_id = r.citation_id
where r.day >= $start and r.day < $end and r.reason = 'ok'
qualify row_number() over (partition by r.citation_id order by s.section_no) = 1
order by r.citation_id
"""


def test_cited_passages_are_the_reference_joins_rows(tmp_path, monkeypatch):
    landing = tmp_path / "landing"
    generate_logs(landing, days=3, requests_per_day=60, seed=11, start_date=START.isoformat())
    config = parse_config({"surfaces": {"default": {"stakes": "low", "sample_rate": 0.3}}}, None)
    monkeypatch.setattr(passages_module, "PROMPTS_PER_BATCH", 7)  # many batches, requests split across them
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        ingest_landing(con, landing, config, final=True)
        check_provenance(con, START, END)
        with transaction(con):
            select_sample(con, START, END, config)
        params = {"start": START, "end": END}
        reference = con.sql(REFERENCE, params=params).pl().cast(PASSAGE_SCHEMA)
        every = cited_passages(con, START, END)
        sampled = cited_passages(con, START, END, selected_only=True)
        one_day = cited_passages(con, date(2026, 11, 3), date(2026, 11, 4))
        # a day whose text retention dropped keeps its citations, with no passage
        con.execute(  # as retention leaves a day (the text is in the text folder's files since schema 12)
            "update prompt_rows set prompt_raw = null, prompt_normalized = null, text_file = null "
            "where day = date '2026-11-04'"
        )
        removed = cited_passages(con, START, END)
    assert reference.height > 300 and 0 < reference["selected"].sum() < reference.height
    assert every.equals(reference)
    assert sampled.equals(reference.filter("selected"))
    assert one_day.equals(reference.filter(pl.col("day") == date(2026, 11, 3)))
    assert removed.height == reference.height
    gone = removed.filter(pl.col("day") == date(2026, 11, 4))
    assert gone.height > 0 and gone["passage"].null_count() == gone.height
    kept = removed.filter(pl.col("day") != date(2026, 11, 4))
    assert kept.equals(reference.filter(pl.col("day") != date(2026, 11, 4)))
    with connect(tmp_path / "empty.duckdb") as empty:
        ensure_schema(empty)
        assert cited_passages(empty, START, END).equals(pl.DataFrame(schema=PASSAGE_SCHEMA))
