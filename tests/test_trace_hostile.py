"""A hostile line or call in a trace file is a reject of its own (docs/adapters.md): wrong types anywhere in
the recorded fixtures, or JSON nested 100,000 deep inside a string attribute, never fail the file; every call the
change did not touch converts exactly as before, every other one is a reject with a reason and a detail naming the
line, and through ingest each file's lines read = records ingested + records rejected."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegate_assets.lib.core.lines import Line
from citegate_assets.lib.ingest.adapters import AdapterSettings, Call, LineReject, adapter, convert_lines, detect_lines
from citegate_assets.lib.ingest.stream import ingest_landing

from .trace_files import merged, otlp_lines

FIXTURES = Path(__file__).parent / "fixtures" / "adapters"
FAST = settings(max_examples=40, deadline=None, database=None)
WRONG = [[], {}, 7, -1.5, "x", None, True, [1, {"a": []}], {"stringValue": 3}, {"intValue": "y"}, "0" * 32]
DEEP = "[" * 100_000  # json.loads of it raises RecursionError
MISSING = object()  # the key or list entry removed: a call missing pieces


def _file(fmt: str) -> list[bytes]:
    """The lines of a recorded fixture; OTLP's as collector batches (several traces per line)."""
    if fmt == "otlp":
        attrs, events = otlp_lines("otlp_attributes.jsonl"), otlp_lines("otlp_events.jsonl")
        # the events file's traces take ids of their own so that the two fixtures merge into one file
        renamed = [json.loads(json.dumps(x).replace("c17e6a7e00000001", "c17e6a7e0000000e")) for x in events]
        lines = [merged(*attrs[:4]), merged(*attrs[4:]), merged(renamed[0], renamed[2]), merged(renamed[1], renamed[3])]
        return [json.dumps(x).encode() for x in lines]
    if fmt == "page":  # the API page saved as one line
        return [json.dumps(json.loads((FIXTURES / "langfuse" / "observations_page.json").read_text())).encode()]
    name = {
        "openinference": "openinference/phoenix_spans.jsonl",
        "langfuse": "langfuse/observations_export.jsonl",
        "anthropic": "anthropic/exchanges.jsonl",
    }[fmt]
    raw = [Line(i, r, 0, len(r)) for i, r in enumerate((FIXTURES / name).read_bytes().splitlines(), 1)]
    _, lines = detect_lines(raw)
    return [line.raw for line in lines]


def _convert(fmt: str, raw: list[bytes]) -> dict[tuple, Call | LineReject]:
    conv = convert_lines(
        adapter("langfuse" if fmt == "page" else fmt),
        [Line(i, r, 0, len(r)) for i, r in enumerate(raw, 1)],
        AdapterSettings(),
    )
    assert conv.error is None, conv.error  # never the whole file
    out: dict[tuple, Call | LineReject] = {}
    for n, item in enumerate(conv.items):
        key = ("call", item.request_id) if isinstance(item, Call) else ("line", item.line_no, n)
        out[key] = item
    return out


def _json_lines(raw: list[bytes]) -> list[int]:
    out = []
    for n, line in enumerate(raw):
        try:
            json.loads(line)
        except ValueError:
            continue
        out.append(n)
    return out


def _paths(value, path=()) -> Iterator[tuple]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _at(value, path: tuple):
    for step in path:
        value = value[step]
    return value


def _ids(value) -> set[str]:
    """Every string anywhere under a JSON value that names a trace, a span or a call (whatever the format)."""
    found: set[str] = set()
    keys = {"traceId", "trace_id", "context.trace_id", "spanId", "span_id", "context.span_id", "id", "parent_id"}
    for path in _paths(value):
        node = _at(value, path)
        if path and path[-1] in keys and isinstance(node, str):
            found.add(node.lower())
        if (
            isinstance(node, dict)
            and isinstance(node.get("response"), dict)
            and isinstance(node["response"].get("id"), str)
        ):
            found.add(node["response"]["id"])
    return found


def _touched(fmt: str, obj, path: tuple) -> set[str]:
    """The ids of what a change at `path` of a line may affect: the whole export block (OTLP: a resource and its
    spans), observation (a Langfuse page) or line that holds it."""
    if fmt == "otlp" and len(path) >= 2:
        return _ids(_at(obj, path[:2]))
    if fmt == "page" and len(path) >= 2 and path[0] == "data":
        return _ids(_at(obj, path[:2]))
    return _ids(obj)


def _untouched(item: Call | LineReject, touched: set[str], fmt: str) -> bool:
    """A call none of whose trace's spans, nor the call itself, was under the change."""
    if not isinstance(item, Call) or item.request_id is None:
        return False
    names = {item.request_id.lower(), *item.request_id.lower().split("/")}
    trace = None
    if item.record is not None or item.reason is not None:
        trace = _trace_of(fmt, item)
    return not (names & touched) and (trace is None or trace not in touched)


_TRACES: dict[tuple[str, str], str] = {}


def _trace_of(fmt: str, call: Call) -> str | None:
    return _TRACES.get((fmt, call.request_id or ""))


def _learn_traces(fmt: str, raw: list[bytes]) -> None:
    """Which trace each call belongs to, from the clean file (a change elsewhere in its trace touches it)."""
    for line in raw:
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # a planted bad line
        spans = []
        for path in _paths(obj):
            node = _at(obj, path)
            if isinstance(node, dict):
                spans.append(node)
        for node in spans:
            trace = node.get("traceId") or node.get("trace_id") or node.get("context.trace_id")
            if trace is None and isinstance(node.get("context"), dict):
                trace = node["context"].get("trace_id")
            ids = [node.get("spanId"), node.get("span_id"), node.get("context.span_id"), node.get("id")]
            if isinstance(node.get("context"), dict):
                ids.append(node["context"].get("span_id"))
            for sid in ids:
                if isinstance(trace, str) and isinstance(sid, str):
                    _TRACES[(fmt, sid)] = trace.lower()
                    _TRACES[(fmt, f"{trace}/{sid}".lower())] = trace.lower()
                    _TRACES[(fmt, f"{trace}/{sid}")] = trace.lower()


FORMATS = ["otlp", "openinference", "langfuse", "page", "anthropic"]
CLEAN = {fmt: _file(fmt) for fmt in FORMATS}
for _fmt, _raw in CLEAN.items():
    _learn_traces(_fmt, _raw)


@pytest.mark.parametrize("fmt", FORMATS)
@FAST
@given(data=st.data())
def test_wrong_types_or_missing_pieces_anywhere_are_rejects_and_every_other_call_converts_as_before(fmt, data):
    raw = CLEAN[fmt]
    before = _convert(fmt, raw)
    n = data.draw(st.sampled_from(_json_lines(raw)), label="line")
    obj = json.loads(raw[n])
    paths = [p for p in _paths(obj) if p]
    path = data.draw(st.sampled_from(paths), label="path")
    wrong = data.draw(st.sampled_from([*WRONG, MISSING]), label="value")
    touched = _touched(fmt, obj, path)
    parent = _at(obj, path[:-1])
    if wrong is MISSING:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(wrong)
    mutated = [*raw[:n], json.dumps(obj).encode(), *raw[n + 1 :]]
    after = _convert(fmt, mutated)
    for key, item in before.items():
        if key[0] != "call":
            continue
        if _untouched(item, touched, fmt) and key in after:
            assert after[key] == item, (path, key)
        elif _untouched(item, touched, fmt):
            pytest.fail(f"{key} is gone after a change at line {n + 1} {path}")
    for item in after.values():  # what the change did affect is a reject with a reason and a detail
        if isinstance(item, LineReject) or item.record is None:
            assert item.reason and item.detail, item


def _replace_string(value, predicate, new: str) -> int:
    """Replace every string under value (in place) for which predicate(path, string) holds; how many."""
    count = 0
    for path in list(_paths(value)):
        node = _at(value, path) if path else value
        if path and isinstance(node, str) and predicate(path, node):
            _at(value, path[:-1])[path[-1]] = new
            count += 1
    return count


@pytest.mark.parametrize(
    "fmt,where,reason",
    [
        ("otlp", "gen_ai.input.messages", "not_of_format"),
        ("otlp", "gen_ai.retrieval.documents", "not_of_format"),
        ("openinference", "attributes.llm.input_messages.0.message.content", None),
        ("openinference", "attributes.input.value", None),
        ("openinference", "attributes.output.value", None),
        ("langfuse", "input", "not_of_format"),
        ("langfuse", "output", "not_of_format"),
        ("page", "input", "not_of_format"),
        ("anthropic", "request", "prompt_undecodable"),
    ],
)
def test_json_nested_100000_deep_in_a_string_attribute_is_that_calls_alone(fmt, where, reason):
    """The deep string at that field of the first landed call that has it: the call is rejected naming the field
    (or, where the field is only one of the places the call is read from, still converts); every other call of the
    file converts as before."""
    raw = CLEAN[fmt]
    before = _convert(fmt, raw)
    landed = [v for v in before.values() if isinstance(v, Call) and v.record is not None]

    def at_field(obj, path: tuple) -> bool:
        if fmt == "otlp":
            return _key_at(obj, path) == where
        dotted = ".".join(map(str, path))
        return dotted == where or dotted.endswith(f".{where}") and fmt == "page"

    for call in landed:
        n = call.line_no - 1
        obj = json.loads(raw[n])
        if fmt == "page":  # the call's own observation of the page
            [i] = [i for i, o in enumerate(obj["data"]) if o["id"] == call.request_id]
            hits = _replace_string(obj["data"][i], lambda p, text: p == (where,), DEEP)
        elif fmt == "otlp":
            block = next(b for b in obj["resourceSpans"] if call.request_id.split("/")[0] in json.dumps(b))
            hits = _replace_string(block, lambda p, text, b=block: at_field(b, p), DEEP)
        else:
            hits = _replace_string(obj, lambda p, text, o=obj: at_field(o, p), DEEP)
        if hits:
            break
    else:
        pytest.fail(f"no landed call has {where}")
    after = _convert(fmt, [*raw[:n], json.dumps(obj).encode(), *raw[n + 1 :]])
    key = ("call", call.request_id)
    item = after[key]
    if reason is not None:
        assert isinstance(item, Call) and item.record is None and item.reason == reason
        assert item.detail and where.split(".")[-1] in item.detail or fmt == "anthropic", item.detail
    trace = _trace_of(fmt, call)
    others = {
        k: v for k, v in before.items() if k[0] == "call" and k != key and (trace is None or _trace_of(fmt, v) != trace)
    }
    assert others and all(after[k] == v for k, v in others.items())


def _key_at(obj, path: tuple) -> str | None:
    """The OTLP attribute key whose value holds the string at path (…attributes[i].value.stringValue)."""
    if len(path) >= 3 and path[-1] == "stringValue" and path[-2] == "value":
        kv = _at(obj, path[:-2])
        return kv.get("key") if isinstance(kv, dict) else None
    return None


def test_a_resource_block_of_the_wrong_type_is_a_piece_reject_beside_the_calls_of_its_line():
    """`resourceSpans[0]` a list, not an object: the rest of its line and file is still read."""
    raw = CLEAN["otlp"]
    obj = json.loads(raw[0])
    obj["resourceSpans"][0] = [obj["resourceSpans"][0]]
    after = _convert("otlp", [json.dumps(obj).encode(), *raw[1:]])
    [piece] = [v for v in after.values() if isinstance(v, LineReject) and v.line_no == 1]
    assert (piece.line_no, piece.reason) == (1, "not_of_format")
    assert piece.detail == "line 1: resourceSpans[0] is a JSON list, not an object"
    assert piece.part is not None and json.loads(piece.part)["line"] == 1
    landed = [v for v in after.values() if isinstance(v, Call) and v.record is not None]
    before = [v for v in _convert("otlp", raw).values() if isinstance(v, Call) and v.record is not None]
    assert len(landed) == len(before) - 1  # only the block's own call is gone (it is in the piece reject)


@pytest.mark.parametrize("fmt", ["otlp", "openinference", "langfuse", "anthropic"])
def test_through_ingest_every_mutated_file_balances_and_its_untouched_calls_land(fmt, tmp_path, config):
    """Ten seeded mutations, each its own file in one landing folder: each file's ledger row balances (lines read
    = records ingested + records rejected), and the calls untouched by its change are in `prompts`."""
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    landing = tmp_path / "landing"
    landing.mkdir()
    rng = random.Random(7)
    raw = CLEAN[fmt]
    before = _convert(fmt, raw)
    expected: dict[str, set[str]] = {}
    for k in range(10):
        n = rng.choice(_json_lines(raw))
        obj = json.loads(raw[n])
        path = rng.choice([p for p in _paths(obj) if p])
        touched = _touched(fmt, obj, path)
        _at(obj, path[:-1])[path[-1]] = copy.deepcopy(rng.choice(WRONG))
        name = f"mutated-{k}.jsonl"
        text = b"\n".join([*raw[:n], json.dumps(obj).encode(), *raw[n + 1 :]]) + b"\n"
        (landing / name).write_bytes(text)
        expected[name] = {
            v.request_id
            for v in before.values()
            if isinstance(v, Call) and v.record is not None and v.request_id
            if _untouched(v, touched, fmt)
        }
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        ingest_landing(con, landing, config, final=True)
        ledger = con.sql(
            "select file_name, lines_read, records_ingested, records_rejected from ingested_files order by 1"
        ).fetchall()
        assert len(ledger) == 10
        for name, read, ingested, rejected in ledger:
            assert read == ingested + rejected, name
        landed = {rid for (rid,) in con.sql("select request_id from prompts").fetchall()}
        refused = {
            rid
            for (rid,) in con.sql(
                "select request_id from ingest_rejects where reason in ('duplicate_request_id', 'request_id_conflict')"
            ).fetchall()
        }
    for name, rids in expected.items():  # in prompts, or refused as a copy of a call another mutated file gave
        assert rids <= landed | refused, (name, rids - landed - refused)
    assert landed


@pytest.mark.parametrize("wrong", [[], {}, ["chat"]])
def test_an_operation_name_of_a_list_or_an_object_is_one_spans_fault_not_the_files(wrong):
    """`gen_ai.operation.name` whose stringValue is a list or an object (unhashable) was looked up in a set of
    names and failed the whole file; now every other call converts as before."""
    raw = CLEAN["otlp"]
    before = _convert("otlp", raw)
    obj = json.loads(raw[0])
    changed = 0
    for path in _paths(obj):
        node = _at(obj, path) if path else obj
        if isinstance(node, dict) and node.get("key") == "gen_ai.operation.name":
            node["value"] = {"stringValue": copy.deepcopy(wrong)}
            changed += 1
            break
    assert changed == 1
    after = _convert("otlp", [json.dumps(obj).encode(), *raw[1:]])
    kept = [key for key in before if key[0] == "call" and key in after and after[key] == before[key]]
    assert len(kept) >= len([k for k in before if k[0] == "call"]) - 1
