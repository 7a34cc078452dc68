"""`citegate demo` with [judge] mode = "cascade", against a stand-in LLM judge on 127.0.0.1, and what the screen saved.

    .venv/bin/python scripts/cascade_demo.py [--days 14 --requests-per-day 300] [--keep DIR]

The stand-in is the tests' OpenAI-compatible server (tests/judge_server.py, real HTTP, the real openai client): it
answers `no` to every pair and counts the requests it receives. The share of calls the screen saves depends only on
the screen and the demo's logs, not on the stand-in's answers. The demo runs in a temporary folder (or --keep DIR)
with the project's citegate.toml, its [judge] table pointed at the stand-in in cascade mode; then this prints the
support verdicts by deciding tier, the share of the LLM calls the screen saved, and the requests the server received.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from citegate_assets.cli import main as citegate  # noqa: E402
from citegate_assets.lib.storage.warehouse import connect  # noqa: E402
from tests.judge_server import Reply, ScriptedJudgeServer  # noqa: E402

SUPPORT_TIERS = """
select count(*) as citations,
       count(*) filter (where decided_by = 'screen') as by_screen,
       count(*) filter (where decided_by = 'llm') as by_llm,
       count(*) filter (where verdict = 'unjudged') as unjudged,
       count(*) filter (where decided_by = 'llm' and not cache_hit) as llm_calls
from support_verdicts  -- llm_calls: the support stage's own; calibration on the demo's labels (drawn from the same
                       -- logs) may have paid for a pair first, and then the support stage reads it from the cache
"""


def cascade_config(server_url: str) -> str:
    """The project's citegate.toml with its [judge] base_url at the stand-in and mode = "cascade"."""
    text = (PROJECT / "citegate.toml").read_text(encoding="utf-8")
    text = re.sub(r'(?m)^base_url = ""', f'base_url = "{server_url}"', text, count=1)
    text, n = re.subn(r'(?m)^mode = "online"', 'mode = "cascade"', text, count=1)
    if n != 1:
        raise SystemExit('citegate.toml: no [judge] mode = "online" line to turn into "cascade"')
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--requests-per-day", type=int, default=300)
    ap.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it (default: a temporary one)")
    args = ap.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="citegate-cascade-"))
    work.mkdir(parents=True, exist_ok=True)
    for name in ("CITEGATE_JUDGE_BASE_URL", "CITEGATE_JUDGE_MODEL", "CITEGATE_CONFIG", "CITEGATE_WAREHOUSE"):
        os.environ.pop(name, None)
    os.environ["DAGSTER_HOME"] = str(work / "dagster_home")
    (work / "dagster_home").mkdir(exist_ok=True)
    (work / "dagster_home" / "dagster.yaml").write_text((PROJECT / "dagster_home" / "dagster.yaml").read_text())
    os.chdir(work)
    with ScriptedJudgeServer(lambda _request, _index: Reply("no")) as server:
        config = work / "citegate.toml"
        config.write_text(cascade_config(server.base_url), encoding="utf-8")
        code = citegate(
            [
                "demo",
                "--config",
                str(config),
                "--days",
                str(args.days),
                "--requests-per-day",
                str(args.requests_per_day),
            ]
        )
        received = len(server.requests)
    if code != 0:
        return code
    with connect(work / "data" / "warehouse.duckdb", read_only=True) as con:
        [(citations, by_screen, by_llm, unjudged, llm_calls)] = con.sql(SUPPORT_TIERS).fetchall()
    share = by_screen / (by_screen + by_llm) if by_screen + by_llm else 0.0
    print(
        f"\ncascade on the demo ({args.days} days x {args.requests_per_day} requests, {work}): {citations:,} support "
        f"citations judged; the screen decided {by_screen:,}, the LLM judge {by_llm:,} ({llm_calls:,} calls), "
        f"unjudged {unjudged:,}; LLM calls saved {share:.1%}. The stand-in judge received {received:,} requests "
        "(support, best evidence and calibration)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
