"""Put first on PYTHONPATH of a `dagster dev` a test starts: the daemon's loop interval, a constant in Dagster
(dagster._daemon.controller.DEFAULT_DAEMON_INTERVAL_SECONDS, 30 s, no instance setting), becomes
CITEGATE_TEST_DAEMON_INTERVAL_S in every process of it that imports the daemon, so that a backfill is evaluated
every second or two instead of every 30 s. Nothing else changes: the daemon, its backfill logic and the run queue
are Dagster's own."""

import importlib.abc
import importlib.machinery
import os
import sys

MODULE = "dagster._daemon.controller"


class _SetDaemonInterval(importlib.abc.MetaPathFinder):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module, seconds = spec.loader.exec_module, self.seconds

        def exec_then_set(module):
            exec_module(module)
            module.DEFAULT_DAEMON_INTERVAL_SECONDS = seconds

        spec.loader.exec_module = exec_then_set  # type: ignore[method-assign]
        return spec


if (_interval := os.environ.get("CITEGATE_TEST_DAEMON_INTERVAL_S")) is not None:
    sys.meta_path.insert(0, _SetDaemonInterval(float(_interval)))
