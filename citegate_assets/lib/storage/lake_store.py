"""Where the lake's files live: a local folder or an S3-compatible bucket (docs/object-storage.md).

The Delta tables (lib/storage/lake.py) are written and committed by delta-rs, which reaches a bucket with
storage_options(), read from the standard AWS variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION). A LakeStore lists, reads and deletes the lake's files for what delta-rs does
not do for us (garbage collection of a crashed writer's files, the files retention and forget supersede, the upgrade
of a lake an earlier citegate wrote): with the filesystem in a folder, through s3fs in a bucket (one flat listing a
prefix). Keys are '/'-separated, relative to the lake root.

DuckDB reads the published file's s3:// views in-process through s3fs (register_s3). What the Delta log says
about a data file (its size and time) is lent to that filesystem (lend()), so binding a view does not ask the bucket,
one HEAD per file, for what the log said a moment before: data files are never modified, only added and deleted.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Iterator

import duckdb

from citegate_assets.lib.core.durable import private_dir

S3_SCHEME = "s3://"
INSTALL_HINT = "pip install 'citegate[s3]'"


class LakeStoreError(RuntimeError):
    pass


@dataclass(frozen=True)
class StoredFile:
    size: int
    modified: datetime  # UTC


def is_uri(value: str | os.PathLike) -> bool:
    """A lake root given as a URI (s3://bucket/prefix), not a path to resolve."""
    return isinstance(value, str) and "://" in value


def open_store(lake: LakeStore | str | os.PathLike) -> LakeStore:
    if isinstance(lake, LakeStore):
        return lake
    if is_uri(lake):
        if not str(lake).startswith(S3_SCHEME):
            raise LakeStoreError(f"{lake}: the lake must be a folder or an s3:// URI")
        return S3Store(str(lake))
    return LocalStore(Path(lake))


class LakeStore(ABC):
    root: str  # what messages show: the folder, or s3://bucket/prefix

    @abstractmethod
    def uri(self, key: str = "") -> str:
        """What delta-rs and readers open: the absolute path, or the s3:// URL, of a key (the root for "")."""

    @abstractmethod
    def storage_options(self) -> dict[str, str] | None:
        """delta-rs's (and polars') storage options for this store; None in a folder."""

    @abstractmethod
    def prepare(self) -> None:
        """Before a publish writes anything: the folder exists (private), or the bucket answers."""

    @abstractmethod
    def files(self, prefix: str) -> dict[str, StoredFile]:
        """Every file under prefix (a folder ending in '/'), by key: one listing."""

    @abstractmethod
    def read(self, key: str) -> bytes | None:
        """The file's bytes, None when it does not exist."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the file; one already gone is not an error."""

    def exists(self, key: str) -> bool:
        return self.read(key) is not None

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around delta-rs's writes: what it creates in a folder is the owner's only (0700 folders, 0600 files)."""
        yield

    def tidy(self, prefixes: Iterable[str]) -> None:
        """Remove the folders left empty under these prefixes, and the prefix's own when it is (a folder; object
        stores have none)."""
        return None

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        """Let a DuckDB connection read this store's uri()s (a local path needs nothing)."""
        return None

    def lend(self, known: dict[str, StoredFile]) -> None:
        """What the Delta log says about data files (by uri()), for the s3fs filesystem DuckDB reads through."""
        return None

    def close(self) -> None:
        """Forget what lend() lent."""
        return None


class LocalStore(LakeStore):
    def __init__(self, path: Path) -> None:
        self.path = Path(path).absolute()
        self.root = str(path)

    def uri(self, key: str = "") -> str:
        return str(self.path / key) if key else str(self.path)

    def storage_options(self) -> dict[str, str] | None:
        return None

    def prepare(self) -> None:
        private_dir(self.path)

    def files(self, prefix: str) -> dict[str, StoredFile]:
        folder = self.path / prefix
        if not folder.is_dir():
            return {}
        found = {}
        for path in folder.rglob("*"):
            if path.is_file():
                info = path.stat()
                modified = datetime.fromtimestamp(info.st_mtime, UTC)
                found[path.relative_to(self.path).as_posix()] = StoredFile(info.st_size, modified)
        return found

    def read(self, key: str) -> bytes | None:
        try:
            return (self.path / key).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None

    def delete(self, key: str) -> None:
        (self.path / key).unlink(missing_ok=True)

    @contextmanager
    def writing(self) -> Iterator[None]:
        # delta-rs creates files and folders with the process umask: the owner only while it writes
        previous = os.umask(0o077)
        try:
            yield
        finally:
            os.umask(previous)

    def tidy(self, prefixes: Iterable[str]) -> None:
        for prefix in prefixes:
            root = self.path / prefix
            if root.is_dir():
                for folder in [*sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)), root]:
                    if not any(folder.iterdir()):
                        folder.rmdir()


class S3Store(LakeStore):
    """An S3-compatible bucket (AWS S3, MinIO, R2): delta-rs writes and commits; s3fs lists (one flat listing per
    prefix, 1,000 keys a page, not one request per folder) and deletes, and lets DuckDB read."""

    def __init__(self, uri: str) -> None:
        bucket, _, prefix = uri.removeprefix(S3_SCHEME).partition("/")
        if not bucket:
            raise LakeStoreError(f"{uri}: no bucket (expected s3://bucket/prefix)")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.root = f"{S3_SCHEME}{bucket}/{self.prefix}".rstrip("/")
        self._filesystem: Any = None
        self._lent: set[str] = set()  # the keys of _KNOWN_OBJECTS this store put there, forgotten by close()

    def uri(self, key: str = "") -> str:
        return f"{self.root}/{key}" if key else self.root

    def storage_options(self) -> dict[str, str] | None:
        return storage_options()

    def _fs(self) -> Any:
        if self._filesystem is None:
            self._filesystem = s3_filesystem()
        return self._filesystem

    def _path(self, key: str) -> str:
        return self.uri(key).removeprefix(S3_SCHEME)

    def prepare(self) -> None:
        try:
            self._fs().ls(self.bucket, refresh=True)
        except (OSError, PermissionError) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise LakeStoreError(f"{self.root}: bucket {self.bucket!r} not reachable ({detail})") from None

    def files(self, prefix: str) -> dict[str, StoredFile]:
        base = self._path("")
        found = self._fs().find(self._path(prefix), detail=True, withdirs=False)
        return {
            path.removeprefix(base + "/"): StoredFile(int(info["size"]), info["LastModified"].astimezone(UTC))
            for path, info in found.items()
            if info.get("type") == "file"
        }

    def read(self, key: str) -> bytes | None:
        try:
            return self._fs().cat_file(self._path(key))
        except FileNotFoundError:
            return None

    def delete(self, key: str) -> None:
        try:
            self._fs().rm_file(self._path(key))
        except FileNotFoundError:
            pass
        name = self._path(key)
        _KNOWN_OBJECTS.pop(name, None)
        self._lent.discard(name)

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        register_s3(con)

    def lend(self, known: dict[str, StoredFile]) -> None:
        for url, stored in known.items():
            name = self._name(url)
            _KNOWN_OBJECTS[name] = {  # s3fs's own info format
                "LastModified": stored.modified,
                "size": stored.size,
                "name": name,
                "type": "file",
                "StorageClass": "STANDARD",
                "VersionId": None,
                "ContentType": None,
            }
            self._lent.add(name)

    @staticmethod
    def _name(url: str) -> str:
        return url.removeprefix(S3_SCHEME)

    def close(self) -> None:
        for name in self._lent:
            _KNOWN_OBJECTS.pop(name, None)
        self._lent.clear()


# "bucket/key" -> s3fs info of the lake's data files an open S3Store was told about by the Delta log. A data file
# is never modified (a changed partition is a new file), so what the log said stays true until the file is deleted.
_KNOWN_OBJECTS: dict[str, dict] = {}


def endpoint_url() -> str | None:
    """The S3 endpoint the AWS variables name (delta-rs, s3fs and polars are told)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def s3_filesystem() -> Any:
    """An s3fs filesystem from the AWS variables, its listings never cached (a cached one would hide new files)."""
    try:
        import s3fs  # type: ignore[import-untyped]
    except ImportError:
        raise LakeStoreError(f"a lake on S3 needs s3fs ({INSTALL_HINT})") from None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return s3fs.S3FileSystem(
        endpoint_url=endpoint_url(),
        client_kwargs={"region_name": region} if region else {},
        skip_instance_cache=True,
        use_listings_cache=False,
    )


def register_s3(con: duckdb.DuckDBPyConnection) -> None:
    """Let `con` read s3:// URLs in-process through s3fs (DuckDB's httpfs extension cannot be installed
    everywhere); the plain duckdb CLI uses httpfs instead (docs/object-storage.md)."""
    if "s3" in con.list_filesystems():
        return  # registered on this database instance already (DuckDB refuses a second one; it is shared)
    try:
        import s3fs
    except ImportError:
        raise LakeStoreError(f"reading a lake on S3 needs s3fs ({INSTALL_HINT})") from None

    class ImmutableObjects(s3fs.S3FileSystem):
        """The lake's data files are never modified, only added and deleted: a file's info (DuckDB asks for it
        many times per file) is fetched once, not one HEAD request per question, and not at all when an open
        S3Store was told it by the Delta log (_KNOWN_OBJECTS)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._immutable: dict[str, dict] = {}

        async def _info(self, path, bucket=None, key=None, refresh=False, version_id=None):
            found = None if refresh else self._immutable.get(path) or _KNOWN_OBJECTS.get(self._strip_protocol(path))
            if found is None:
                found = await super()._info(path, bucket, key, refresh=refresh, version_id=version_id)
                if found.get("type") == "file":
                    self._immutable[path] = found
            return found

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    filesystem = ImmutableObjects(
        endpoint_url=endpoint_url(),
        client_kwargs={"region_name": region} if region else {},
        skip_instance_cache=True,  # one per database instance: fsspec's shared instance would outlive it
        use_listings_cache=False,  # a cached folder listing would hide a file written after it
    )
    con.register_filesystem(filesystem)


def register_for_views(con: duckdb.DuckDBPyConnection) -> None:
    """For a reader of the published file: register s3fs when a view names an s3:// object, else nothing."""
    [(found,)] = con.execute(
        "select count(*) from duckdb_views() where not internal and contains(sql, $scheme)", {"scheme": "'s3://"}
    ).fetchall()
    if found:
        register_s3(con)


def storage_options() -> dict[str, str]:
    """storage_options for delta-rs and polars (scan_delta, scan_parquet) on s3:// URIs, from the AWS variables."""
    names = {
        "aws_access_key_id": "AWS_ACCESS_KEY_ID",
        "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
        "aws_session_token": "AWS_SESSION_TOKEN",
    }
    options = {option: os.environ[name] for option, name in names.items() if os.environ.get(name)}
    if region := os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"):
        options["aws_region"] = region
    if url := endpoint_url():
        options["aws_endpoint_url"] = url
        if url.startswith("http://"):
            options["aws_allow_http"] = "true"
    return options
