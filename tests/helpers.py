"""Hand-written renderers of each built-in template (independent of the sample-log generator) and a
scenario that exercises every provenance reason on any profile and encoding."""

from __future__ import annotations

import html
import json

CHUNKS = {
    "kb-1#c1": "The Pro plan costs $49 per month.\nRefunds take 3\u20135 business days.",
    "kb-2#c1": "Support is available 24/7 for \u201cEnterprise\u201d customers & partners.",
    "kb-3#c2": "Data is retained for 90 days. After that it is deleted permanently from all regions.",
    "kb-4#c1": "Hardware appliances ship within 10 business days of the order.",
}
TRUNCATED_TO = "Data is retained for 90 days. After that"  # what of kb-3#c2 reached the prompt
QUESTION = 'My contract says "the SLA is 99.9% uptime" - is that right?'

# (chunk_id cited, span, expected reason)
CITATIONS = [
    ("kb-1#c1", "Refunds take 3-5  business days.", "ok"),
    ("kb-9#c9", "The Pro plan costs $49 per month.", "fabricated_id"),
    ("kb-4#c1", "ship within 10 business days", "dropped_before_prompt"),
    ("kb-3#c2", "deleted permanently from all regions", "span_truncated"),
    ("kb-1#c1", "costs fifty dollars a month", "span_missing"),
    ("kb-1#c1", "the SLA is 99.9% uptime", "span_outside_context"),
    ("kb-1#c1", 'available 24/7 for "Enterprise" customers', "span_in_other_chunk"),
    ("kb-2#c1", "for \u201cEnterprise\u201d customers & partners", "ok"),
]
RENDERED = [("kb-1#c1", CHUNKS["kb-1#c1"]), ("kb-2#c1", CHUNKS["kb-2#c1"]), ("kb-3#c2", TRUNCATED_TO)]

PROFILE_ENCODINGS = [
    ("anthropic-xml", "text"),
    ("anthropic-xml", "json"),
    ("anthropic-xml", "python_repr"),
    ("llamaindex-citation", "text"),
    ("llamaindex-citation", "python_repr"),
    ("llamaindex-citation", "json"),
    ("langchain-stuff", "json"),
    ("langchain-stuff-mustache", "json"),
    ("plain-list", "text"),
    ("plain-list", "python_repr"),
    ("plain-list", "json"),
]


def render_text(template: str) -> tuple[str, str]:
    """(system-or-whole prompt, user message) as the serving layer rendered them."""
    if template == "anthropic-xml":
        docs = "".join(
            f'  <document index="{i}">\n    <source>{cid}</source>\n'
            f"    <document_content>\n{text}\n    </document_content>\n  </document>\n"
            for i, (cid, text) in enumerate(RENDERED, 1)
        )
        return (
            f"You are a billing assistant. Cite chunk ids.\n\n<documents>\n{docs}</documents>\n\nQuestion: {QUESTION}",
            "",
        )
    if template == "llamaindex-citation":
        sources = "\n\n".join(f"Source {i}:\n{text}" for i, (_, text) in enumerate(RENDERED, 1))
        return (
            "Please provide an answer based solely on the provided sources. For example:\n"
            "Source 1:\nThe sky is red in the evening and blue in the morning.\n"
            "Source 2:\nWater is wet when the sky is red.\n"
            "Query: When is water wet?\nAnswer: Water will be wet when the sky is red [2].\n"
            "Now it's your turn. Below are several numbered sources of information:\n"
            f"------\n{sources}\n------\nQuery: {QUESTION}\nAnswer: "
        ), ""
    if template in ("langchain-stuff", "langchain-stuff-mustache"):
        esc = (
            (lambda s: html.escape(s, quote=True).replace("&#x27;", "'"))
            if template.endswith("mustache")
            else (lambda s: s)
        )
        ctx = "\n\n".join(f"[{cid}] {esc(text)}" for cid, text in RENDERED)
        system = (
            "Use the following pieces of context to answer the user's question. \n"
            "If you don't know the answer, just say that you don't know, don't try to make up an answer.\n"
            f"----------------\n{ctx}"
        )
        return system, esc(QUESTION)
    if template == "plain-list":
        ctx = "\n".join(f"[{cid}] {text.replace(chr(10), ' ')}" for cid, text in RENDERED)
        return f"Answer using only the context.\n\nContext:\n{ctx}\n\nQuestion: {QUESTION}\nAnswer:", ""
    raise ValueError(template)


def render_prompt(template: str, encoding: str) -> str:
    system, user = render_text(template)
    if encoding == "text":
        assert not user
        return system
    if encoding == "python_repr":
        assert not user
        return repr(system)
    if template == "anthropic-xml":
        head, _, rest = system.partition("\n\n")
        return json.dumps(
            {
                "model": "claude",
                "max_tokens": 512,
                "system": head,
                "messages": [{"role": "user", "content": [{"type": "text", "text": rest}]}],
            }
        )
    if user:
        return json.dumps(
            {"model": "gpt", "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]},
            ensure_ascii=False,
        )
    return json.dumps({"model": "gpt", "messages": [{"role": "user", "content": system}]})


def scenario_record(
    template: str, encoding: str, request_id: str = "req-1", logged_at: str = "2026-11-02T10:00:00Z"
) -> dict:
    return {
        "request_id": request_id,
        "logged_at": logged_at,
        "surface": "test-surface",
        "answer_model": "gpt-test",
        "prompt": render_prompt(template, encoding),
        "prompt_encoding": encoding,
        "template": template,
        "retrieved": [
            {"chunk_id": cid, "rank": i, "text": text, "doc_id": cid.split("#")[0], "chunking": "sentence"}
            for i, (cid, text) in enumerate(CHUNKS.items(), 1)
        ],
        "answer": "An answer.",
        "citations": [
            {"chunk_id": cid, "span": span, "claim": f"Claim {i}."} for i, (cid, span, _) in enumerate(CITATIONS)
        ],
    }


def write_jsonl(path, records: list, *, raw_lines: list[str] | None = None) -> None:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    lines += raw_lines or []
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_once(root, plan):
    """A nightly run of root/landing into root/w.duckdb with its own Dagster home: shared by a module's tests.
    Returns the run's result (its events: checks, materializations)."""
    import shutil
    from pathlib import Path

    import pytest

    from citegate_assets.pipeline import run_range

    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))
        mp.setenv("CITEGATE_REVIEWS", str(root / "reviews"))
        result = run_range(plan, landing=root / "landing", warehouse=root / "w.duckdb", config_file=None)
    assert result.success
    return result


def copy_run(root, target) -> None:
    """The files a run_once wrote (not its Dagster home), copied over a test's own folder."""
    import shutil

    for path in root.iterdir():
        if path.name == "dagster_home":
            continue
        dest = target / path.name
        if dest.exists():
            shutil.rmtree(dest) if dest.is_dir() else dest.unlink()
        (shutil.copytree if path.is_dir() else shutil.copy2)(path, dest)


def lake_versions(lake) -> dict[str, int]:
    """The version of each of the lake's Delta tables (a folder or an s3:// URI): what a direct reader sees."""
    from citegate_assets.lib.storage import lake as lake_module
    from citegate_assets.lib.storage.lake_store import open_store

    store = open_store(lake)
    found = {}
    for spec in lake_module.LAKE_TABLES:
        table = lake_module._open(store, spec.name)
        if table is not None:
            found[spec.name] = table.version()
    return found


def another_writer_commits_first(monkeypatch, table: str, commit) -> list[str]:
    """Make the next write of `table`'s days lose a race: once its rows start streaming into delta-rs (its snapshot
    read, its files being written), commit() runs to the end (another writer's whole publish: in another process,
    publish_elsewhere(), as delta-rs cannot be entered again from the thread it streams on), so this write's commit
    finds a newer version that replaced the same days. Returns the log: "write" for each write of the table's days
    that started, "other" when commit() ran."""
    from citegate_assets.lib.storage import lake as lake_module

    real_rows = lake_module._rows
    ran: list[str] = []

    def rows(con, spec, parts):
        stream = real_rows(con, spec, parts)
        if spec.name != table or not parts:
            return stream
        ran.append("write")
        if "other" in ran:
            return stream
        import pyarrow as pa

        def first_then_other():
            for i, batch in enumerate(stream):
                if i == 0:
                    ran.append("other")
                    commit()
                yield batch

        return pa.RecordBatchReader.from_batches(stream.schema, first_then_other())

    monkeypatch.setattr(lake_module, "_rows", rows)
    return ran


def publish_elsewhere(warehouse, published, lake, days: list[str]) -> None:
    """publish_lake in a process of its own (the environment inherited): another writer of the same lake."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import sys\n"
        "from datetime import date\n"
        "from pathlib import Path\n"
        "from citegate_assets.lib.storage.publish import publish_lake\n"
        "publish_lake(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], "
        "run_days=[date.fromisoformat(d) for d in sys.argv[4:]])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    subprocess.run(
        [sys.executable, "-c", script, str(warehouse), str(published), str(lake), *days], env=env, check=True
    )


def as_schema_11(con) -> None:
    """A schema 12 warehouse turned back into schema 11's layout, for the migration tests: `prompts` a table again,
    its text inline, no text folder."""
    import shutil

    from citegate_assets.lib.storage.text_store import text_dir

    folder = text_dir(con)
    con.execute("create temp table text_inline as select request_id, prompt_raw, prompt_normalized from prompts")
    con.execute("drop view prompts")
    con.execute("alter table prompt_rows rename to prompts")
    con.execute(
        "update prompts p set prompt_raw = t.prompt_raw, prompt_normalized = t.prompt_normalized "
        "from text_inline t where t.request_id = p.request_id"
    )
    con.execute("alter table prompts drop column text_file")
    con.execute("drop table text_inline")
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


RAW_TEXT = (  # docs/warehouse.md, "retrievals": how analysts read the text as logged back (schemas 11 and 13)
    "select request_id, position, coalesce(r.text, case when r.raw_encoding = 'json' "
    "then json_extract_string('\"' || substr(p.prompt_raw, r.raw_start + 1, r.raw_end - r.raw_start) || '\"', '$') "
    "else substr(p.prompt_raw, r.raw_start + 1, r.raw_end - r.raw_start) end) "
    "from retrievals r left join prompts p using (request_id, day) order by request_id, position"
)


# ---------------------------------------------------------------------------------------------------------------------
# Inline markers and span-less citations: one call's chunks, rendered with numbered headers (or none); chunk 3 cut
# before its last sentence, chunk 5 retrieved but left out; each planted sentence cites chunks by number.
MARKER_CHUNKS = {
    "kb#1": "Refunds are issued to the original payment method. Once a refund is approved, it takes 3 to 5 business "
    "days to appear on your statement.",
    "kb#2": "Support is available around the clock for Enterprise customers. Pro customers get answers within one "
    "business day.",
    "kb#3": "Deleted workspaces are kept for 30 days. Backups are encrypted with AES-256 and stored in two regions. "
    "Audit logs are retained for 400 days on the Team plan.",
    "kb#4": "Hardware appliances ship within 10 business days of the order. Shipping to the EU is free.",
    "kb#5": "The REST API allows 600 requests per minute per token. Batch endpoints hold at most 500 items.",
}
MARKER_CUT = {"kb#3": "Deleted workspaces are kept for 30 days. Backups are encrypted with AES-256 and stored in two"}
MARKER_RENDERED = ["kb#1", "kb#2", "kb#3", "kb#4"]  # kb#5 (rank 5) is left out of the prompt
# (claim, [(number cited, expected reason)]); 9 names no chunk
MARKER_PLANTS = [
    ("Refunds take 3 to 5 business days to appear on your statement", [(1, "ok")]),
    ("Audit logs are retained for 400 days on the Team plan", [(3, "span_truncated")]),
    ("The REST API allows 600 requests per minute per token", [(5, "dropped_before_prompt")]),
    ("Enterprise customers get a dedicated onboarding manager", [(9, "fabricated_id")]),
    (
        "Backups are encrypted with AES-256 and Pro customers get answers within one business day",
        [(2, "ok"), (3, "ok")],
    ),
    (
        "Hardware ships within 10 business days and the API allows 600 requests per minute",
        [(4, "ok"), (5, "dropped_before_prompt")],
    ),
    ("Support is available around the clock for Enterprise customers", [(1, "ok"), (2, "ok"), (3, "ok")]),
]
MARKER_QUESTION = "How long do refunds take, and how are backups kept?"


def _ranges(numbers: list[int]) -> str:
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


# style -> how a sentence's cited numbers are written after it
MARKER_STYLES = {
    "brackets": lambda ns: "".join(f"[{n}]" for n in ns),
    "list": lambda ns: "[" + ", ".join(map(str, ns)) + "]",
    "ranges": lambda ns: "[" + _ranges(ns) + "]",
    "lenticular": lambda ns: "".join(f"\u3010{n}\u3011" for n in ns),
    "footnotes": lambda ns: "".join(f"[^{n}]" for n in ns),
    "sources": lambda ns: (
        "(Source " + str(ns[0]) + ")" if len(ns) == 1 else "(Sources " + ", ".join(map(str, ns)) + ")"
    ),
    "chunk_ids": lambda ns: "".join(f"[kb#{n}]" for n in ns),
    "custom": lambda ns: "".join(f"{{{{{n}}}}}" for n in ns),
}
CUSTOM_MARKER = r"\{\{(?P<ref>[^{}]+)\}\}"  # [surfaces.custom] citation_marker


def marker_prompt(headers: str) -> str:
    """The call's prompt: chunks in rank order with `headers` numbering (source | document | index | none)."""
    texts = [(n, MARKER_CUT.get(cid, MARKER_CHUNKS[cid])) for n, cid in enumerate(MARKER_RENDERED, 1)]
    if headers == "source":
        body = "\n\n".join(f"Source {n}:\n{t}" for n, t in texts)
        return f"Answer with citations like [1].\n------\n{body}\n------\nQuery: {MARKER_QUESTION}\nAnswer: "
    if headers == "document":
        body = "\n".join(f"Document [{n}](Title: kb {n}): {t}" for n, t in texts)
        return (
            f"Answer the question using the documents and cite them.\n\n{body}\n\nQuestion: {MARKER_QUESTION}\nAnswer:"
        )
    if headers == "index":
        docs = "".join(
            f'<document index="{n}">\n<document_content>\n{t}\n</document_content>\n</document>\n' for n, t in texts
        )
        return f"<documents>\n{docs}</documents>\n\n{MARKER_QUESTION}"
    body = "\n\n".join(t for _, t in texts)
    return f"Use the following pieces of context to answer.\n----------------\n{body}\n\nQuestion: {MARKER_QUESTION}"


def marker_answer(style: str) -> str:
    write = MARKER_STYLES[style]
    answer = " ".join(f"{claim} {write([n for n, _ in cited])}." for claim, cited in MARKER_PLANTS)
    if style == "footnotes":
        numbers = sorted({n for _, cited in MARKER_PLANTS for n, _ in cited})
        answer += "\n\n" + "\n".join(f"[^{n}]: Source {n}" for n in numbers)
    return answer


def marker_expected(style: str) -> list[tuple[str, str, str]]:
    """(chunk id checked, claim, reason) per citation, in citation order."""
    out = []
    for claim, cited in MARKER_PLANTS:
        for n, reason in cited:
            checked = f"kb#{n}" if n <= 5 else (f"kb#{n}" if style == "chunk_ids" else str(n))
            out.append((checked, claim + ".", reason))
    return out


def marker_record(style: str, headers: str = "source", request_id: str | None = None) -> dict:
    return {
        "request_id": request_id or f"markers-{style}-{headers}",
        "logged_at": "2026-11-02T10:00:00Z",
        "surface": "custom" if style == "custom" else "markers",
        "answer_model": "gpt-test",
        "prompt": marker_prompt(headers),
        "retrieved": [
            {"chunk_id": cid, "rank": n, "text": text} for n, (cid, text) in enumerate(MARKER_CHUNKS.items(), 1)
        ],
        "answer": marker_answer(style),
    }


def spanless_record(headers: str = "source", request_id: str = "spanless-1") -> dict:
    """The same call with structured citations that carry no span: {chunk_id, claim}."""
    record = marker_record("brackets", headers, request_id)
    record["answer"] = "An answer."
    record["citations"] = [
        {"chunk_id": f"kb#{n}", "claim": claim + "."} for claim, cited in MARKER_PLANTS for n, _ in cited
    ]
    return record
