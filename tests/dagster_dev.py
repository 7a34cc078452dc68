"""A real `dagster dev` (webserver, daemon, code server) for tests: started on 127.0.0.1 with a free port, in
its own process group, talked to over the webserver's GraphQL endpoint as the UI does, and stopped with every
process it started (the run workers included) even when the test fails."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
DAGSTER = Path(sys.executable).with_name("dagster")

# the query the UI sends for its "Materialize" → "Launch backfill" dialog (ui-core LaunchAssetChoosePartitionsDialog:
# LAUNCH_PARTITION_BACKFILL_MUTATION), with the result types the schema has (dagster_graphql/schema/backfill.py)
LAUNCH_PARTITION_BACKFILL = """
mutation LaunchPartitionBackfill($backfillParams: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $backfillParams) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PartitionSetNotFoundError { message }
    ... on PartitionKeysNotFoundError { message }
    ... on InvalidStepError { invalidStepKey }
    ... on InvalidOutputError { stepKey invalidOutputName }
    ... on UnauthorizedError { message }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PythonError { message stack }
  }
}
"""

# the UI's "Materialize" button for assets outside a partitioned backfill: one run of the hidden asset job
# (ui-core LaunchAssetExecutionButton: executionParamsForAssetJob, LAUNCH_PIPELINE_EXECUTION_MUTATION)
LAUNCH_PIPELINE_EXECUTION = """
mutation LaunchPipelineExecution($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId pipelineName } }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on UnauthorizedError { message }
    ... on PythonError { message stack }
  }
}
"""

WORKSPACE_STATUS = """
query { workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on RepositoryLocation { repositories { name } }
  ... on PythonError { message } } } } } }
"""

DAEMON_HEALTH = """
query { instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } } }
"""

BACKFILL_STATUS = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { id status numPartitions error { message } }
    ... on PythonError { message }
    ... on BackfillNotFoundError { message }
  }
}
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DagsterDev:
    """`dagster dev -w workspace.yaml` with the given environment; its output goes to `log`."""

    def __init__(self, env: Mapping[str, str], log: Path, workspace: Path = PROJECT / "workspace.yaml") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.location = self.repository = ""  # known once wait_ready() returns
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            [str(DAGSTER), "dev", "-h", "127.0.0.1", "-p", str(self.port), "-w", str(workspace)],
            cwd=PROJECT,
            env=dict(env),
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends the webserver, daemon, code server, runs
        )

    # --- talking to it ---

    def graphql(self, query: str, variables: dict | None = None, timeout: float = 30) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise AssertionError(f"GraphQL errors: {payload['errors']}\n{self.tail()}")
        return payload["data"]

    def wait_ready(self, timeout: float = 120) -> None:
        """Until the webserver answers, the code location is loaded and the daemon's backfill and run queue
        loops report healthy."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"dagster dev exited with {self.proc.returncode}\n{self.tail()}")
            try:
                entries = self.graphql(WORKSPACE_STATUS, timeout=10)["workspaceOrError"]["locationEntries"]
                loaded = [e for e in entries if e["loadStatus"] == "LOADED"]
                errors = [e for e in loaded if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"]
                if errors:
                    raise AssertionError(f"the code location did not load: {errors}\n{self.tail()}")
                daemons = self.graphql(DAEMON_HEALTH, timeout=10)["instance"]["daemonHealth"]["allDaemonStatuses"]
                healthy = {d["daemonType"] for d in daemons if d["healthy"]}
                last = {"locations": entries, "healthy daemons": sorted(healthy)}
                if entries and len(loaded) == len(entries) and {"BACKFILL", "QUEUED_RUN_COORDINATOR"} <= healthy:
                    self.location = loaded[0]["name"]
                    self.repository = loaded[0]["locationOrLoadError"]["repositories"][0]["name"]
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last = exc
            time.sleep(1)
        raise AssertionError(f"dagster dev not ready after {timeout:.0f}s (last: {last})\n{self.tail()}")

    def launch_asset_run(self, assets: list[list[str]], checks: list[tuple[list[str], str]], tags: dict) -> str:
        """A run of the hidden asset job over these assets (and their checks), as the UI's Materialize sends it."""
        params = {
            "mode": "default",
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
            "runConfigData": "{}",
            "selector": {
                "repositoryLocationName": self.location,
                "repositoryName": self.repository,
                "pipelineName": "__ASSET_JOB",
                "assetSelection": [{"path": path} for path in assets],
                "assetCheckSelection": [{"assetKey": {"path": path}, "name": name} for path, name in checks],
            },
        }
        result = self.graphql(LAUNCH_PIPELINE_EXECUTION, {"executionParams": params})["launchPipelineExecution"]
        assert result["__typename"] == "LaunchRunSuccess", f"{result}\n{self.tail()}"
        return result["run"]["runId"]

    def launch_partition_backfill(self, params: dict) -> str:
        result = self.graphql(LAUNCH_PARTITION_BACKFILL, {"backfillParams": params})["launchPartitionBackfill"]
        assert result["__typename"] == "LaunchBackfillSuccess", f"{result}\n{self.tail()}"
        return result["backfillId"]

    def backfill(self, backfill_id: str) -> dict:
        return self.graphql(BACKFILL_STATUS, {"id": backfill_id})["partitionBackfillOrError"]

    def wait_for(self, done: Callable[[], Any], timeout: float, what: str, describe: Callable[[], str]) -> Any:
        """Poll done() every second until it returns something truthy; on timeout fail with describe()."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"dagster dev exited with {self.proc.returncode}\n{describe()}\n{self.tail()}")
            value = done()
            if value:
                return value
            time.sleep(1)
        raise AssertionError(f"{what}: not after {timeout:.0f}s\n{describe()}\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        """The last lines of dagster dev's output (webserver and daemon logs)."""
        self._out.flush()
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"(no log: {exc})"
        return f"--- dagster dev, last {lines} lines of {self.log} ---\n" + "\n".join(text[-lines:])

    # --- stopping it ---

    def stop(self, grace_s: float = 20) -> None:
        """SIGTERM to the process group (dagster dev shuts its services down), then SIGKILL to whatever is left
        of it, and of any process it started in another group."""
        descendants = _descendants(self.proc.pid)
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        for pid, started in descendants:
            fields = _stat(pid)
            if fields and fields[19] == started:  # still the process it saw (not a reused pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self._out.close()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _descendants(pid: int) -> list[tuple[int, str]]:
    """The processes below pid (from /proc): (pid, start time), to kill any that left its process group."""
    parent: dict[int, int] = {}
    started: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields:
                parent[int(entry.name)], started[int(entry.name)] = int(fields[1]), fields[19]
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, pp in parent.items() if pp == current]
        found += [(p, started[p]) for p in children]
        frontier += children
    return found


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, ...; [19] is the start time)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()
