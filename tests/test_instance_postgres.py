"""The same code with the Dagster instance on PostgreSQL, by configuration only.

A throwaway PostgreSQL server on 127.0.0.1 (tests/pg_server.py), a Dagster home whose dagster.yaml is the
package's plus `storage: postgres:`, and a real `citegate run`: the run, its materializations, its check
evaluations and its pool slots live in PostgreSQL, and the warehouse holds what the sqlite instance gives."""

from __future__ import annotations

from datetime import date

import dagster as dg
import psycopg2
import pytest
import yaml

from citegate_assets.cli import main
from citegate_assets.lib.core.paths import default_dagster_yaml
from citegate_assets.lib.storage.warehouse import connect

from .helpers import CITATIONS, scenario_record, write_jsonl
from .pg_server import postgres_server

DAY = date(2026, 11, 2)
REQUESTS = 3


@pytest.fixture(scope="module")
def pg():
    with postgres_server() as server:
        yield server


def postgres_home(path, server):
    config = yaml.safe_load(default_dagster_yaml().read_text())
    config["storage"] = {
        "postgres": {
            "postgres_db": {
                "hostname": server.host,
                "port": server.port,
                "username": server.user,
                "password": "",
                "db_name": server.db_name,
                # SQLAlchemy 2.1 maps plain postgresql:// to psycopg 3; dagster-postgres installs psycopg2
                "scheme": "postgresql+psycopg2",
            }
        }
    }
    path.mkdir()
    (path / "dagster.yaml").write_text(yaml.safe_dump(config))
    return path


def test_a_nightly_run_on_a_postgres_instance(tmp_path, landing, monkeypatch, pg):
    records = [
        scenario_record("plain-list", "text", request_id=f"r-{i}", logged_at=f"{DAY}T1{i}:00:00+00:00")
        for i in range(REQUESTS)
    ]
    write_jsonl(landing / "app.jsonl", records)
    home = postgres_home(tmp_path / "dagster_home", pg)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("CITEGATE_LABELS", str(tmp_path / "no-labels"))
    warehouse = tmp_path / "w.duckdb"
    argv = ["run", "--logs", str(landing), "--warehouse", str(warehouse), "--dagster-home", str(home)]
    assert main([*argv, "--start", str(DAY), "--end", str(DAY), "--quiet"]) == 0

    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        [run] = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS
        gated = instance.get_latest_materialization_event(dg.AssetKey("provenance_results"))
        assert gated is not None and gated.run_id == run.run_id

    with psycopg2.connect(host=pg.host, port=pg.port, user=pg.user, dbname=pg.db_name) as db, db.cursor() as cur:
        cur.execute("select status from runs")
        assert cur.fetchall() == [("SUCCESS",)]
        cur.execute(
            "select count(*) from event_logs where dagster_event_type = 'ASSET_MATERIALIZATION'"
            " and asset_key = %s and partition = %s",
            ('["provenance_results"]', str(DAY)),
        )
        assert cur.fetchall() == [(1,)]
        cur.execute("select count(*) from event_logs where dagster_event_type = 'ASSET_CHECK_EVALUATION'")
        assert cur.fetchall()[0][0] >= 4  # the four checks every nightly evaluates, at least

    published = warehouse.with_name(warehouse.stem + ".published.duckdb")
    with connect(published, read_only=True) as con:
        reasons = con.sql("select citation_id, reason from provenance_results order by citation_id").fetchall()
    expected = sorted((f"r-{i}#{p}", reason) for i in range(REQUESTS) for p, (_, _, reason) in enumerate(CITATIONS))
    assert reasons == expected

    # a second run of the same day on the same instance: a new run, same rows (the pool slot was released)
    assert main([*argv, "--start", str(DAY), "--end", str(DAY), "--quiet"]) == 0
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert [r.status for r in instance.get_runs()] == [dg.DagsterRunStatus.SUCCESS] * 2
    with connect(published, read_only=True) as con:
        again = con.sql("select citation_id, reason from provenance_results order by citation_id").fetchall()
    assert again == expected
