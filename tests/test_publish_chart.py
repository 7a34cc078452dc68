import datetime as dt
import os
import stat
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from citegate_assets.lib.metrics.chart import RATES, png_data_uri, rates_chart_png
from citegate_assets.lib.storage.publish import publish_copy

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# An analyst: opens the published copy read-only, signals ready, keeps querying for ~3 s on the same
# connection, then prints the row count it saw; exits 1 if the count ever changed.
ANALYST = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
first = con.sql("select count(*) from answers").fetchall()[0][0]
print("ready", flush=True)
deadline = time.monotonic() + 3.0
while time.monotonic() < deadline:
    if con.sql("select count(*) from answers").fetchall()[0][0] != first:
        sys.exit(1)
    time.sleep(0.05)
con.close()
print(first, flush=True)
"""

# An analyst on the *working* file: holds a read-only connection until stdin closes.
HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
con.sql("select count(*) from answers").fetchall()
print("ready", flush=True)
sys.stdin.read()
"""


def make_source(path: Path) -> Path:
    con = duckdb.connect(str(path))
    try:
        con.execute(
            "create table answers (answer_id integer, cited_ids varchar[], answered_at timestamptz, prompt varchar)"
        )
        con.execute(
            "insert into answers values (1, ['d1', 'd2'], '2025-03-03 10:00:00+00', 'what is x?'),"
            " (2, [], '2025-03-04 11:30:00+01', 'it''s y'), (3, null, null, null)"
        )
        con.execute("create table weekly_metrics (week_start date, surface varchar, metric varchar, value double)")
        con.execute("insert into weekly_metrics values ('2025-03-03', 'web', 'support_pass_rate', 0.8)")
    finally:
        con.close()
    return path


def add_answers(path: Path, n: int) -> None:
    con = duckdb.connect(str(path))
    try:
        con.execute("insert into answers select 100 + i, ['new'], now(), 'new prompt' from range(?) t(i)", [n])
    finally:
        con.close()


def rows(path: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.sql(sql).fetchall()
    finally:
        con.close()


def start(script: str, path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"helper process did not get ready: {line!r} {err}")
    return proc


@pytest.fixture
def source(tmp_path):
    # A space and a quote in the path (and the database name) exercise the SQL quoting.
    directory = tmp_path / "work dir's"
    directory.mkdir()
    return make_source(directory / "work 'db'.duckdb")


def test_publish_copies_rows_privately_and_atomically(source, tmp_path):
    target = tmp_path / "pub lished" / "published.duckdb"

    result = publish_copy(source, target)

    assert result == {"tables": 2, "bytes": target.stat().st_size, "path": str(target)}
    assert rows(target, "select * from answers order by answer_id") == rows(
        source, "select * from answers order by answer_id"
    )
    assert rows(target, "select cited_ids, answered_at from answers where answer_id = 1") == [
        (["d1", "d2"], dt.datetime(2025, 3, 3, 10, tzinfo=dt.UTC))
    ]
    assert rows(target, "select count(*) from weekly_metrics") == [(1,)]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["published.duckdb"]

    inode = target.stat().st_ino
    add_answers(source, 5)
    publish_copy(source, target)
    assert target.stat().st_ino != inode
    assert rows(target, "select count(*) from answers") == [(8,)]
    assert sorted(p.name for p in target.parent.iterdir()) == ["published.duckdb"]


def test_publish_failure_leaves_target_and_no_tmp(source, tmp_path, monkeypatch):
    target = tmp_path / "published.duckdb"
    publish_copy(source, target)
    before = target.read_bytes()
    add_answers(source, 2)

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        publish_copy(source, target)

    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["published.duckdb", "work dir's"]


def test_analyst_on_published_copy_never_blocks_publish(source, tmp_path):
    target = tmp_path / "published.duckdb"
    publish_copy(source, target)
    analyst = start(ANALYST, target)
    try:
        add_answers(source, 4)  # the pipeline writes its working file meanwhile
        result = publish_copy(source, target)
        assert analyst.poll() is None, "the analyst session ended before the publish; nothing was proven"
        assert result["tables"] == 2
        assert rows(target, "select count(*) from answers") == [(7,)]
        out, err = analyst.communicate(timeout=20)
    finally:
        if analyst.poll() is None:
            analyst.kill()
            analyst.communicate()
    assert analyst.returncode == 0, err
    assert out.split() == ["3"]  # the old snapshot, read consistently throughout


def test_analyst_on_working_file_blocks_the_writer(source):
    """Why we publish: a read-only reader of the working file locks the nightly writer out."""
    holder = start(HOLDER, source)
    try:
        with pytest.raises(duckdb.IOException, match="lock"):
            duckdb.connect(str(source))
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
        holder.stdout.close()
        holder.stderr.close()


def metrics_frame() -> pl.DataFrame:
    weeks = [dt.date(2025, 3, 3), dt.date(2025, 3, 10), dt.date(2025, 3, 17)]
    records = [
        (week, surface, metric, 0.5 + 0.1 * w - 0.05 * m + (0.2 if surface == "web" else 0))
        for surface in ("chat", "web")
        for w, week in enumerate(weeks)
        for m, metric in enumerate(RATES)
    ]
    records.append((weeks[0], "web", "answers", 120.0))  # not a rate: ignored
    frame = pl.DataFrame(
        records,
        schema={"week_start": pl.Date, "surface": pl.String, "metric": pl.String, "value": pl.Float64},
        orient="row",
    )
    return frame.with_columns(
        pl.when((pl.col("surface") == "chat") & (pl.col("week_start") == weeks[1]) & (pl.col("metric") == RATES[1]))
        .then(None)
        .otherwise(pl.col("value"))
        .alias("value")
    )


def test_rates_chart_png(tmp_path):
    frame = metrics_frame()
    assert frame["value"].null_count() == 1

    path = rates_chart_png(frame, tmp_path / "charts" / "rates.png")

    data = path.read_bytes()
    assert path == tmp_path / "charts" / "rates.png"
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000
    assert rates_chart_png(frame, tmp_path / "again.png").read_bytes() == data  # deterministic
    assert png_data_uri(path).startswith("data:image/png;base64,iVBORw0KGgo")


def test_rates_chart_png_empty(tmp_path):
    empty = pl.DataFrame(schema={"week_start": pl.Date, "surface": pl.String, "metric": pl.String, "value": pl.Float64})
    path = rates_chart_png(empty, tmp_path / "empty.png")
    assert path.read_bytes().startswith(PNG_SIGNATURE)


def test_rates_chart_closes_its_figures(tmp_path):
    import matplotlib.pyplot as plt

    rates_chart_png(metrics_frame(), tmp_path / "a.png")
    assert plt.get_fignums() == []


def test_publish_refuses_a_copy_with_different_row_counts(source, tmp_path, monkeypatch):
    from citegate_assets.lib.storage import publish

    real = publish.row_counts
    calls = []

    def short_copy(con):
        counts = real(con)
        calls.append(counts)
        if len(calls) == 2:  # the second call counts the copy
            counts["main.answers"] -= 1
        return counts

    monkeypatch.setattr(publish, "row_counts", short_copy)
    target = tmp_path / "published.duckdb"
    with pytest.raises(RuntimeError, match="main.answers"):
        publish_copy(source, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work dir's"]


def many_surfaces_frame(n: int) -> pl.DataFrame:
    """n surfaces over 3 weeks with numerators and denominators, as headline_for_chart returns them; the busiest
    surface (most citations) has a control sequence in its name, and busyness is not name order."""
    weeks = [dt.date(2025, 3, 3), dt.date(2025, 3, 10), dt.date(2025, 3, 17)]
    records = []
    for i in range(n):
        surface = "evil\x1b[2J\nsurface" if i == 0 else f"s{i:03d}"
        citations = 10 * n if i == 0 else 1 + (i * 37) % n  # every count distinct
        for week in weeks:
            for metric in RATES:
                numerator = citations // 2
                records.append((week, surface, metric, numerator / citations, float(numerator), citations))
    return pl.DataFrame(
        records,
        schema={
            "week_start": pl.Date,
            "surface": pl.String,
            "metric": pl.String,
            "value": pl.Float64,
            "numerator": pl.Float64,
            "denominator": pl.Int64,
        },
        orient="row",
    )


def test_rates_chart_draws_the_busiest_surfaces_and_pools_the_rest(tmp_path):
    """300 surfaces: 8 lines for the surfaces with the most citations, one "other (292 surfaces)" line; the
    legend shows control characters escaped. (One panel per surface took minutes; this draws in seconds.)"""
    import matplotlib.pyplot as plt

    from citegate_assets.lib.metrics.chart import MAX_SURFACES, rates_figure

    frame = many_surfaces_frame(300)
    citations = dict(
        frame.filter(pl.col("metric") == RATES[0]).group_by("surface").agg(pl.col("denominator").sum()).iter_rows()
    )
    busiest = sorted(citations, key=lambda s: -citations[s])[:MAX_SURFACES]
    assert MAX_SURFACES == 8 and busiest[0].startswith("evil")

    fig = rates_figure(frame)
    try:
        [legend] = fig.legends
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels == ["evil\\x1b[2J\\nsurface", *busiest[1:], "other (292 surfaces)"]
        assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == list(RATES)
        other = fig.axes[0].lines[-1].get_ydata()  # pooled: their numerators over their denominators
        rest = frame.filter(
            ~pl.col("surface").is_in(busiest)
            & (pl.col("metric") == RATES[0])
            & (pl.col("week_start") == dt.date(2025, 3, 3))
        )
        assert other[0] == pytest.approx(rest["numerator"].sum() / rest["denominator"].sum())
    finally:
        plt.close(fig)

    path = rates_chart_png(frame, tmp_path / "many.png")
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert plt.get_fignums() == []
