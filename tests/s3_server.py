"""A throwaway S3-compatible server for a test: moto's server in its own process, listening on 127.0.0.1 on a
free port, with one bucket; stopped at the end. Clients reach it through the standard AWS variables
(env()), as a MinIO or R2 user would configure citegate. requests() reads what the server received from its
own request log, whichever client sent it (boto3, or s3fs under DuckDB)."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3  # type: ignore[import-untyped]

START_TIMEOUT_S = 30.0
# one line per request in the server's (werkzeug's) log: "GET /bucket/key?query HTTP/1.1" 200, colored with
# terminal escapes when the status is not 200 (a ranged GET's 206, a 404)
_REQUEST = re.compile(r'"(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/[\d.]+" (\d{3})')
_COLOR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Request:
    method: str
    target: str  # the path and query, as sent
    status: int

    @property
    def kind(self) -> str:
        """HEAD, GET (an object's bytes), LIST (GET on the bucket: list-type=2), PUT, POST or DELETE."""
        if self.method == "GET" and ("list-type=" in self.target or self.target.count("/") == 1):
            return "LIST"
        return self.method


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    log: Path

    def env(self) -> dict[str, str]:
        """The AWS variables citegate, boto3, s3fs and the DuckDB CLI's secret read (moto takes any key)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "citegate-test",
            "AWS_SECRET_ACCESS_KEY": "citegate-test-secret",
            "AWS_REGION": "us-east-1",
        }

    def client(self):
        env = self.env()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_REGION"],
        )

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def requests(self) -> list[Request]:
        """Every request the server received so far, in order. The server writes a request's line before it
        answers, so a request the caller has had its answer to is in the list."""
        return [
            Request(m.group(1), m.group(2), int(m.group(3)))
            for m in map(_REQUEST.search, _COLOR.sub("", self.log.read_text(errors="replace")).splitlines())
            if m is not None
        ]

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[Request]]:
        """The requests received inside the block, in order (filled in when it ends)."""
        before = len(self.requests())
        received: list[Request] = []
        yield received
        received += self.requests()[before:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited with {process.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"moto_server did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S} s")


@contextlib.contextmanager
def s3_server(bucket: str = "citegate-lake") -> Iterator[S3Server]:
    port = _free_port()
    folder = Path(tempfile.mkdtemp(prefix="citegate-s3-"))
    log = folder / "moto.log"  # a file, not a pipe: the server logs every request and must never block on it
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_listening(port, process, log)
        server = S3Server(f"http://127.0.0.1:{port}", bucket, log)
        server.client().create_bucket(Bucket=bucket)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)
