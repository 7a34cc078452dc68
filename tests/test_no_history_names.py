"""No tracked file names a unit of work or an issue number as the name of a part: docs describe the system as it is,
and history lives in git. Greps every file `git ls-files` lists; a failure names each file:line. The only text not
read is the quoted third-party text of the label sets (a JSONL line's claim and passage, which cite magazines'
issue numbers and sports sessions of their own); every other field of those lines is read."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
HISTORY_NAME = re.compile(r"\bissue\s+\d+|\bissues?\s+#\d+|\bsession\s+\d+", re.IGNORECASE)
QUOTED_FIELDS = ("claim", "passage")  # labels/*.jsonl: text quoted from the data set's sources


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT, capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name]


def readable_lines(name: str, text: str) -> list[str]:
    if not (name.startswith("labels/") and name.endswith(".jsonl")):
        return text.splitlines()
    lines = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        if isinstance(record, dict):
            record = {key: value for key, value in record.items() if key not in QUOTED_FIELDS}
        lines.append(json.dumps(record, ensure_ascii=False))
    return lines


def history_names() -> list[str]:
    found = []
    for name in tracked_files():
        path = PROJECT / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary: images, Parquet, gzip
        for number, line in enumerate(readable_lines(name, text), start=1):
            match = HISTORY_NAME.search(line)
            if match:
                found.append(f"{name}:{number}: {match.group(0)!r} in {line.strip()[:100]!r}")
    return found


def test_no_tracked_file_names_an_issue_or_a_session():
    found = history_names()
    assert not found, "history names in tracked files (history belongs in git):\n" + "\n".join(found)


def test_the_grep_finds_each_form_and_skips_only_quoted_label_text():
    assert [m.group(0) for m in HISTORY_NAME.finditer("x (Issue 16), issues #3, Session 11, sign-in sessions")] == [
        "Issue 16",
        "issues #3",
        "Session 11",
    ]
    label = json.dumps({"id": "a", "claim": "Kerrang! issue 1102", "passage": "Session 1", "labeller": "see issue 4"})
    assert [HISTORY_NAME.findall(line) for line in readable_lines("labels/x.jsonl", label)] == [["issue 4"]]
