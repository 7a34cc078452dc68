"""The support sample: policy per surface, deterministic, recomputable from the citation id."""

from datetime import date

import pytest

from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.support.sampling import sample_key, select_sample

from .helpers import scenario_record, write_jsonl

START, END = date(2026, 11, 2), date(2026, 11, 3)
CONFIG = parse_config(
    {
        "surfaces": {
            "default": {"stakes": "low", "sample_rate": 0.3},
            "legal": {"stakes": "high"},
            "search": {"stakes": "off"},
        }
    },
    None,
)


@pytest.fixture
def sampled(con, landing):
    records = []
    for i in range(300):
        r = scenario_record("plain-list", "text", request_id=f"r{i}")
        r["surface"] = ("legal", "search", "chat")[i % 3]
        records.append(r)
    write_jsonl(landing / "a.jsonl", records)
    ingest_landing(con, landing, CONFIG)
    check_provenance(con, START, END)
    select_sample(con, START, END, CONFIG)
    return con


def test_one_row_per_provenance_passing_citation(sampled):
    [(n_ok,)] = sampled.sql("select count(*) from provenance_results where reason = 'ok'").fetchall()
    [(n, distinct)] = sampled.sql("select count(*), count(distinct citation_id) from support_sample").fetchall()
    assert n == distinct == n_ok == 600


def test_policy_per_surface(sampled):
    rows = dict(
        sampled.sql("select surface, list(distinct why order by why) from support_sample group by surface").fetchall()
    )
    assert rows == {"legal": ["high_stakes"], "search": ["stakes_off"], "chat": ["not_sampled", "sampled"]}
    [(share,)] = sampled.sql("select avg(selected::int) from support_sample where surface = 'chat'").fetchall()
    assert 0.2 < share < 0.4  # 200 citations at rate 0.3
    assert sampled.sql("select bool_and(selected) from support_sample where surface = 'legal'").fetchall() == [(True,)]
    assert sampled.sql("select bool_or(selected) from support_sample where surface = 'search'").fetchall() == [(False,)]


def test_sql_key_equals_python_key_and_rerun_is_identical(sampled):
    first = sampled.sql("select citation_id, sample_key, selected from support_sample order by 1").fetchall()
    for citation_id, key, _selected in first[:50]:
        assert key == pytest.approx(sample_key(citation_id), abs=1e-12)
    select_sample(sampled, START, END, CONFIG)
    assert sampled.sql("select citation_id, sample_key, selected from support_sample order by 1").fetchall() == first


def test_every_surface_seen_gets_its_policy_once(sampled):
    """The default policy is applied in one place (Config.surface); SQL joins the complete table it makes."""
    from citegate_assets.lib.support.policies import registered_policies

    with registered_policies(sampled, CONFIG, START, END) as frame:
        assert frame.select("surface", "stakes", "sample_rate").rows() == [
            ("chat", "low", 0.3),  # not listed: the default policy under its own name
            ("legal", "high", 0.1),
            ("search", "off", 0.1),
        ]
        assert sampled.sql("select count(*) from surface_policies").fetchall() == [(3,)]
