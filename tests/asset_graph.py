"""The asset graph as plain JSON: each asset's group, kinds, dependencies, checks, partitions, pools and backfill
policy, the jobs, schedules, resources and executor. tests/test_asset_graph.py compares it with the checked-in
tests/snapshots/asset_graph.json; after a deliberate change to the graph, regenerate that file with
`PYTHONPATH=. python -m tests.asset_graph --write` and commit the diff with the change."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "asset_graph.json"
# the first daily partition follows CITEGATE_FIRST_DAY (else the date): pinned, so the snapshot is the same any day
PINNED_FIRST_DAY = "2026-01-01"
REGENERATE = "PYTHONPATH=. python -m tests.asset_graph --write"


def _partitions(partitions_def) -> dict | None:
    if partitions_def is None:
        return None
    described: dict = {"type": type(partitions_def).__name__, "description": str(partitions_def)}
    for attr in ("cron_schedule", "timezone", "fmt", "end_offset"):
        value = getattr(partitions_def, attr, None)
        if value is not None:
            described[attr] = value
    return described


def _mappings(node) -> dict:
    return {parent.to_user_string(): repr(mapping) for parent, mapping in sorted(node.partition_mappings.items())}


def describe() -> dict:
    """The loaded definitions (citegate_assets.definitions, as `dagster dev` loads them) as a JSON-ready dict."""
    from citegate_assets.definitions import defs

    d = defs()
    graph = d.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys()):
        node = graph.get(key)
        checks = {}
        for check_key in sorted(node.check_keys, key=lambda k: k.name):
            spec = graph.get_check_spec(check_key)
            checks[check_key.name] = {
                "blocking": spec.blocking,
                "additional_deps": sorted(dep.asset_key.to_user_string() for dep in spec.additional_deps),
                "partitions": _partitions(spec.partitions_def),
            }
        computed_with = sorted(k.to_user_string() for k in node.execution_set_asset_keys if k != key)
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "kinds": sorted(node.kinds),
            "execution": node.execution_type.value,
            "deps": sorted(parent.to_user_string() for parent in node.parent_keys),
            "partition_mappings": _mappings(node),
            "computed_with": computed_with,
            "partitions": _partitions(node.partitions_def),
            "backfill_policy": repr(node.backfill_policy) if node.backfill_policy else None,
            "pools": sorted(node.pools or ()),
            "automation_condition": repr(node.automation_condition) if node.automation_condition else None,
            "checks": checks,
        }
    jobs = {
        job.name: sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys)
        for job in sorted(d.resolve_all_job_defs(), key=lambda j: j.name)
        if not job.name.startswith("__")
    }
    schedules = {
        s.name: {
            "job": s.job_name,
            "cron": s.cron_schedule,
            "timezone": s.execution_timezone,
            "default_status": s.default_status.value,
        }
        for s in sorted(d.schedules or [], key=lambda s: s.name)
    }
    return {
        "assets": assets,
        "jobs": jobs,
        "schedules": schedules,
        "sensors": sorted(s.name for s in d.sensors or []),
        "resources": sorted(d.resources or {}),
        "executor": d.executor.name if d.executor else None,
    }


def render(graph: dict) -> str:
    return json.dumps(graph, indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    os.environ["CITEGATE_FIRST_DAY"] = PINNED_FIRST_DAY
    text = render(describe())
    if argv == ["--write"]:
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(text, encoding="utf-8")
        print(f"wrote {SNAPSHOT}")
    elif not argv:
        sys.stdout.write(text)
    else:
        print("usage: python -m tests.asset_graph [--write]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
