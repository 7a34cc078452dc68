"""The asset graph (keys, groups, dependencies, checks, partitions, pools) matches the checked-in snapshot
tests/snapshots/asset_graph.json: a change to the graph is a visible diff, committed with the change."""

import json
import os
import subprocess
import sys

import pytest

from tests.asset_graph import PINNED_FIRST_DAY, REGENERATE, SNAPSHOT
from tests.conftest import PROJECT


def current_graph_text(tmp_path) -> str:
    """The graph as a fresh process loads it: its own environment, CITEGATE_FIRST_DAY pinned."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "DAGSTER_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "tests.asset_graph"], cwd=PROJECT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def changes(expected, current, path: str = "") -> list[str]:
    """Each changed leaf as `assets.<key>.<field>: was X, now Y` (an asset or field added or gone, likewise)."""
    if isinstance(expected, dict) and isinstance(current, dict):
        out = []
        for name in sorted(set(expected) | set(current)):
            where = f"{path}.{name}" if path else name
            if name not in current:
                out.append(f"{where}: gone (was {json.dumps(expected[name])})")
            elif name not in expected:
                out.append(f"{where}: new ({json.dumps(current[name])})")
            else:
                out += changes(expected[name], current[name], where)
        return out
    return [] if expected == current else [f"{path}: was {json.dumps(expected)}, now {json.dumps(current)}"]


def test_the_asset_graph_matches_its_snapshot(tmp_path):
    current = current_graph_text(tmp_path)
    expected = SNAPSHOT.read_text(encoding="utf-8")
    if current != expected:
        changed = changes(json.loads(expected), json.loads(current)) or ["(formatting only)"]
        pytest.fail(
            "the asset graph differs from tests/snapshots/asset_graph.json:\n  "
            + "\n  ".join(changed)
            + f"\nif the change is intended, run `{REGENERATE}` and commit the file with it",
            pytrace=False,
        )


def test_a_changed_graph_is_reported_by_asset_and_field():
    graph = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    changed = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    changed["assets"]["support_verdicts"]["pools"] = []
    changed["assets"]["support_verdicts"]["checks"]["new_check"] = {"blocking": False}
    del changed["assets"]["text_retention"]
    assert changes(graph, changed) == [
        'assets.support_verdicts.checks.new_check: new ({"blocking": false})',
        'assets.support_verdicts.pools: was ["citegate_judge"], now []',
        "assets.text_retention: gone (was " + json.dumps(graph["assets"]["text_retention"]) + ")",
    ]


def test_the_snapshot_holds_what_the_graph_is_made_of():
    """The snapshot records each part named in its promise, and the daily partitions start on the pinned day."""
    graph = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    provenance = graph["assets"]["provenance_results"]
    assert provenance["group"] == "provenance"
    assert provenance["deps"] == ["citations", "prompt_sections", "prompts", "retrievals"]
    assert provenance["checks"] == {
        "one_row_per_citation": {"additional_deps": [], "blocking": True, "partitions": None}
    }
    assert provenance["partitions"]["description"] == f"Daily, starting {PINNED_FIRST_DAY} UTC."
    assert graph["assets"]["support_verdicts"]["pools"] == ["citegate_judge"]
    assert graph["assets"]["weekly_surface_metrics"]["pools"] == ["citegate_duckdb"]
    assert graph["schedules"]["nightly_schedule"]["cron"] == "0 2 * * *"
