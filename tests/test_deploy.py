"""The Kubernetes deployment in deploy/ is validated here, since no cluster exists on this machine.

deploy/dagster.yaml loads as a real instance on a PostgreSQL server on 127.0.0.1 and its run launcher's config
passes dagster-k8s's own schema; the Helm values agree with the image (deploy/Dockerfile), with that instance and
with the settings citegate reads; the code location the image serves loads."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster_k8s import K8sRunLauncher

from citegate_assets.lib.core.paths import ENV
from citegate_assets.lib.storage.warehouse import MEMORY_LIMIT_ENV, connection_settings

from .pg_server import postgres_server

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
PYPROJECT = DEPLOY.parent / "pyproject.toml"


@pytest.fixture(scope="module")
def values():
    return yaml.safe_load((DEPLOY / "values.yaml").read_text())


@pytest.fixture(scope="module")
def instance_yaml():
    return yaml.safe_load((DEPLOY / "dagster.yaml").read_text())


def dockerfile_cmd() -> list[str]:
    [line] = [line for line in (DEPLOY / "Dockerfile").read_text().splitlines() if line.startswith("CMD ")]
    return yaml.safe_load(line.removeprefix("CMD "))


def test_the_instance_loads_on_postgres(tmp_path, monkeypatch):
    with postgres_server() as pg:
        for name, value in {
            "DAGSTER_PG_HOST": pg.host,
            "DAGSTER_PG_USER": pg.user,
            "DAGSTER_PG_PASSWORD": "",
            "DAGSTER_PG_DB": pg.db_name,
        }.items():
            monkeypatch.setenv(name, value)
        home = tmp_path / "home"
        home.mkdir()
        # the deployed file with the test server's port (the deployment uses PostgreSQL's 5432)
        text = (DEPLOY / "dagster.yaml").read_text().replace("port: 5432", f"port: {pg.port}")
        (home / "dagster.yaml").write_text(text)
        config, _ = dagster_instance_config(str(home))
        assert config["concurrency"]["runs"]["max_concurrent_runs"] == 1
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
            assert instance.get_runs() == []


def test_the_run_launcher_config_passes_dagster_k8s_schema(instance_yaml):
    launcher = instance_yaml["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    result = process_config(K8sRunLauncher.config_type(), launcher["config"])
    assert result.success, [error.message for error in result.errors or []]
    # a misspelt key is refused by the same schema, so the check above is not vacuous
    assert not process_config(K8sRunLauncher.config_type(), {**launcher["config"], "volume_mount": []}).success


def test_the_image_command_serves_the_code_location(values, tmp_path, dagster_home):
    """The image's command, with the Helm values' arguments, on 127.0.0.1: the gRPC server answers its health
    check and lists the citegate location's nightly job."""
    [deployment] = values["dagster-user-deployments"]["deployments"]
    cmd = dockerfile_cmd()
    host_at = cmd.index("-h")
    assert cmd[:3] == ["dagster", "api", "grpc"] and deployment["dagsterApiGrpcArgs"] == cmd[3:host_at]
    assert deployment["port"] == int(cmd[cmd.index("-p") + 1])
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert deployment["includeConfigInLaunchedRuns"]["enabled"] is True
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dagster = str(Path(sys.executable).with_name("dagster"))
    server = subprocess.Popen(
        [dagster, *cmd[1:host_at], "-h", "127.0.0.1", "-p", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        health = [dagster, "api", "grpc-health-check", "-h", "127.0.0.1", "-p", str(port)]
        while subprocess.run(health, cwd=tmp_path, capture_output=True).returncode != 0:
            assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
            assert time.monotonic() < deadline, "the code server did not answer its health check in 120 s"
            time.sleep(1)
        listed = subprocess.run(
            [dagster, "job", "list", "--grpc-host", "127.0.0.1", "--grpc-port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert listed.returncode == 0, listed.stderr
        assert "Repository __repository__" in listed.stdout and "nightly_job" in listed.stdout, listed.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_image_installs_the_extras_the_instance_needs():
    pyproject = PYPROJECT.read_text()
    install = re.search(r'pip install --no-cache-dir "([^"]+)"', (DEPLOY / "Dockerfile").read_text())
    assert install and install.group(1).endswith("[postgres,k8s]")
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    assert version and f"citegate-{version.group(1)}-py3-none-any.whl" in install.group(1)
    for extra, package in (("postgres", "dagster-postgres"), ("k8s", "dagster-k8s")):
        block = re.search(rf"^{extra} = \[(.*?)\]", pyproject, re.M | re.S)
        assert block and package in block.group(1), extra


def test_values_and_instance_agree_on_paths_and_one_writer(values, instance_yaml, monkeypatch):
    [deployment] = values["dagster-user-deployments"]["deployments"]
    env = {item["name"]: item["value"] for item in deployment["env"]}
    # only variables citegate reads: the paths of lib/core/paths.py, and DuckDB's memory limit
    # (lib/storage/warehouse.py)
    assert set(env) <= {*ENV.values(), MEMORY_LIMIT_ENV}
    monkeypatch.setenv(MEMORY_LIMIT_ENV, env[MEMORY_LIMIT_ENV])
    assert connection_settings()["memory_limit"] == env[MEMORY_LIMIT_ENV]  # a size DuckDB reads
    mounts = [m["mountPath"] for m in deployment["volumeMounts"]]
    paths = {name: value for name, value in env.items() if name in ENV.values()}
    assert all(any(value.startswith(mount + "/") for mount in mounts) for value in paths.values())
    launcher = instance_yaml["run_launcher"]["config"]
    assert dict(item.split("=", 1) for item in launcher["env_vars"]) == env
    assert launcher["volume_mounts"] == [
        {"name": m["name"], "mountPath": m["mountPath"]} for m in deployment["volumeMounts"]
    ]
    assert launcher["volumes"] == deployment["volumes"]
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert queued["maxConcurrentRuns"] == instance_yaml["concurrency"]["runs"]["max_concurrent_runs"] == 1
    assert values["postgresql"]["postgresqlScheme"] == instance_yaml["storage"]["postgres"]["postgres_db"]["scheme"]
