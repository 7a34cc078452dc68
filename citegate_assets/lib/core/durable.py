"""Writes that survive a crash or power loss: fsync a file before renaming it into place, then its folder."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable; best effort (some platforms or filesystems refuse a directory)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # the file's own fsync still holds
    finally:
        os.close(fd)


def private_dir(folder: Path) -> None:
    """A folder (and its parents) the owner only can read: everything under it holds user data."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)


def replace_durably(staged: Path, final: Path) -> None:
    """A fully written temporary file put in place: owner-only, fsynced, renamed, the rename fsynced."""
    os.chmod(staged, 0o600)
    fsync_file(staged)
    os.replace(staged, final)
    fsync_dir(final.parent)
