"""A real, scriptable OpenAI files + batches server for tests (stdlib only): what `[judge] mode = "batch"` talks to.

    with ScriptedBatchServer(lambda body, i: Reply("yes")) as server:
        client = BatchClient(JudgeSettings(base_url=server.base_url, model="m"), BatchSettings(...))

Routes: POST /v1/files (multipart: file, purpose), POST /v1/batches (its `metadata` kept), GET /v1/batches
(newest first, `after`/`limit` paging with `has_more` as OpenAI does), GET /v1/batches/{id},
GET /v1/files/{id}/content. Each batch is `validating` when created, `in_progress` while polled, and reaches
`final_status` (completed | failed | expired | cancelled) on its `polls_to_finish`-th poll, unless `hold` is set
(then it stays in_progress until `hold` is cleared). When it finishes, each input line's body is answered by
`answer(body, line_index)` (judge_server.Reply: `text` for a 200, another `status` for a failed request, which goes
to the error file); `mangle(lines)` may then rewrite the output file's lines (garble, drop, duplicate).
What the server received is recorded: `uploads` (file id -> parsed JSONL lines), `created` (batch create bodies),
`polls` (batch id -> count), `downloads` (file ids), `lists` (the query of each list request) and `paths`
(method and path of every request). A reply's text and `failure_message` (a failed batch's error) may hold the
placeholders of judge_server.echo_key: the key of the poll that finished the batch is echoed there.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from .judge_server import Reply, _completion_body, _error_body, _Server, echo_key

Answer = Callable[[dict, int], Reply]
Mangle = Callable[[list[str]], list[str]]
TERMINAL = ("completed", "failed", "expired", "cancelled")


class ScriptedBatchServer:
    def __init__(
        self,
        answer: Answer | None = None,
        *,
        polls_to_finish: int = 1,
        final_status: str = "completed",
        mangle: Mangle | None = None,
    ):
        self.answer: Answer = answer or (lambda body, i: Reply("yes"))
        self.polls_to_finish = polls_to_finish
        self.final_status = final_status
        self.mangle = mangle
        self.hold = False
        self.fail_list = False  # GET /v1/batches answers 503
        self.echo_upload_error = False  # an upload answers 400 quoting its first line, as validating gateways do
        self.failure_message = "scripted batch failure"  # a failed batch's error
        self.uploads: dict[str, list[dict]] = {}
        self.upload_purposes: dict[str, str] = {}
        self.created: list[dict] = []
        self.batches: dict[str, dict] = {}
        self.polls: dict[str, int] = {}
        self.downloads: list[str] = []
        self.paths: list[tuple[str, str]] = []
        self.lists: list[dict[str, str]] = []
        self.files: dict[str, bytes] = {}
        self.base_url = ""
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ScriptedBatchServer:
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedBatchServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what was received -------------------------------------------------------------------------

    def lines_of(self, batch_id: str) -> list[dict]:
        """The JSONL request lines of one batch's input file."""
        return self.uploads[self.batches[batch_id]["input_file_id"]]

    # -- handling --------------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
                pass

            def do_POST(self):
                server._route(self, "POST")

            def do_GET(self):
                server._route(self, "GET")

        return Handler

    def _route(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        path = handler.path.split("?", 1)[0].rstrip("/")
        body = _read_body(handler) if method == "POST" else b""
        with self._lock:
            self.paths.append((method, path))
            parts = path.split("/")
            if method == "POST" and path == "/v1/files":
                status, payload = self._upload(handler.headers.get("Content-Type", ""), body)
            elif method == "POST" and path == "/v1/batches":
                status, payload = self._create(body)
            elif method == "GET" and path == "/v1/batches":
                status, payload = self._list(handler.path)
            elif method == "GET" and len(parts) == 4 and parts[:3] == ["", "v1", "batches"]:
                status, payload = self._poll(parts[3], handler.headers.get("Authorization"))
            elif method == "GET" and len(parts) == 5 and parts[:3] == ["", "v1", "files"] and parts[4] == "content":
                if parts[3] not in self.files:
                    status, payload = 404, _error_body(404, "no such file")
                else:
                    self.downloads.append(parts[3])
                    _send(handler, 200, "application/octet-stream", self.files[parts[3]])
                    return
            else:
                status, payload = 404, _error_body(404, "no such route")
        _send(handler, status, "application/json", payload)

    def _upload(self, content_type: str, body: bytes) -> tuple[int, bytes]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
        )
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            fields[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
        if "file" not in fields:
            return 400, _error_body(400, "no file part")
        filename, data = fields["file"]
        if self.echo_upload_error:
            return 400, _error_body(400, f"invalid line 1: {data.decode('utf-8').splitlines()[0][:2000]}")
        purpose = fields.get("purpose", (None, b""))[1].decode()
        file_id = f"file-in-{len(self.uploads)}"
        self.uploads[file_id] = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        self.upload_purposes[file_id] = purpose
        self.files[file_id] = data
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename or "upload.jsonl",
            "purpose": purpose or "batch",
            "status": "processed",
        }
        return 200, json.dumps(obj).encode()

    def _create(self, body: bytes) -> tuple[int, bytes]:
        request = json.loads(body)
        self.created.append(request)
        if request.get("input_file_id") not in self.uploads:
            return 400, _error_body(400, "no such input file")
        batch_id = f"batch_{len(self.batches)}"
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": request.get("endpoint"),
            "errors": None,
            "input_file_id": request["input_file_id"],
            "completion_window": request.get("completion_window"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(time.time()),
            "metadata": request.get("metadata"),
            "request_counts": {"total": len(self.uploads[request["input_file_id"]]), "completed": 0, "failed": 0},
        }
        self.polls[batch_id] = 0
        return 200, json.dumps(self.batches[batch_id]).encode()

    def _list(self, raw_path: str) -> tuple[int, bytes]:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(raw_path).query))
        self.lists.append(query)
        if self.fail_list:
            return 503, _error_body(503, "list unavailable")
        limit = int(query.get("limit", "20"))
        if not 1 <= limit <= 100:
            return 400, _error_body(400, "limit must be between 1 and 100")
        newest_first = sorted(self.batches.values(), key=lambda b: int(b["id"].split("_")[1]), reverse=True)
        ids = [b["id"] for b in newest_first]
        after = query.get("after")
        start = ids.index(after) + 1 if after in ids else 0
        page = newest_first[start : start + limit]
        payload = {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": start + limit < len(ids),
        }
        return 200, json.dumps(payload).encode()

    def _poll(self, batch_id: str, authorization: str | None = None) -> tuple[int, bytes]:
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, _error_body(404, "no such batch")
        self.polls[batch_id] += 1
        if batch["status"] not in TERMINAL:
            if self.hold or self.polls[batch_id] < self.polls_to_finish:
                batch["status"] = "in_progress"
            else:
                self._finish(batch, authorization)
        return 200, json.dumps(batch).encode()

    def _finish(self, batch: dict, authorization: str | None = None) -> None:
        status = self.final_status
        batch["status"] = status
        if status == "failed":
            batch["errors"] = {
                "object": "list",
                "data": [
                    {"code": "invalid_request", "message": echo_key(self.failure_message, authorization), "line": 1}
                ],
            }
            return
        lines = self.uploads[batch["input_file_id"]]
        if status in ("expired", "cancelled"):
            lines = lines[: len(lines) // 2]  # the provider answered part of the file before it stopped
        out, errors = [], []
        for i, line in enumerate(lines):
            reply = self.answer(line["body"], i)
            text = echo_key(reply.text, authorization) if reply.text is not None else None
            if reply.status == 200:
                response = {
                    "status_code": 200,
                    "request_id": f"req_{i}",
                    "body": json.loads(_completion_body(line["body"], text, i)),
                }
                out.append(
                    json.dumps(
                        {"id": f"batch_req_{i}", "custom_id": line["custom_id"], "response": response, "error": None}
                    )
                )
            else:
                response = {
                    "status_code": reply.status,
                    "request_id": f"req_{i}",
                    "body": json.loads(_error_body(reply.status, text)),
                }
                errors.append(
                    json.dumps(
                        {"id": f"batch_req_{i}", "custom_id": line["custom_id"], "response": response, "error": None}
                    )
                )
        if self.mangle is not None:
            out = self.mangle(out)
        n = len(self.files)
        if out:
            batch["output_file_id"] = f"file-out-{n}"
            self.files[batch["output_file_id"]] = ("\n".join(out) + "\n").encode()
        if errors:
            batch["error_file_id"] = f"file-err-{n}"
            self.files[batch["error_file_id"]] = ("\n".join(errors) + "\n").encode()
        batch["request_counts"] = {
            "total": len(self.uploads[batch["input_file_id"]]),
            "completed": len(out),
            "failed": len(errors),
        }


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        data = b""
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()
                return data
            data += handler.rfile.read(size)
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _send(handler: BaseHTTPRequestHandler, status: int, content_type: str, body: bytes) -> None:
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()
    except OSError:
        pass
