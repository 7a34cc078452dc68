"""What a test needs from the machine (a Debian package's program): skip on a laptop without it, fail in CI.

`.ci/run` installs every such package through scripts/ci/setup.d/, so under CI=true a missing program is an
install step that broke, never a reason to pass by skipping.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require_program(program: str, package: str) -> str:
    """The path of `program`; skips (laptop) or fails (CI=true) naming the Debian `package` that brings it."""
    path = shutil.which(program)
    if path:
        return path
    message = f"{program} not found: install the Debian package {package} (scripts/ci/setup.d/ does it in CI)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)
