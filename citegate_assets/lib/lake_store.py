"""Where the lake's objects live: a local folder or an S3-compatible bucket (docs/object-storage.md).

lib/lake.py and lib/publish.py reach the lake only through a LakeStore. Keys are '/'-separated, relative to
the lake root. The local store is the folder as before: a temporary name, fsync, rename, files 0600, folders
0700. The S3 store reads its endpoint, credentials and region from the standard AWS variables
(AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION): a day file is written by DuckDB to
a local temporary file, uploaded and its size checked; a manifest is a conditional put (If-None-Match: * for a
new one, If-Match: <ETag> to replace one), so two publishers never silently overwrite each other.

What a publish learns about the lake's objects from its listings and uploads (size, ETag, time) is lent to the
s3fs filesystem DuckDB reads through (_KNOWN_OBJECTS), so binding the published views does not ask the bucket
again, one HEAD per partition file, for what the listing said a moment before.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb

from citegate_assets.lib.durable import private_dir, replace_durably

S3_SCHEME = "s3://"
INSTALL_HINT = "pip install 'citegate[s3]'"


class LakeConflict(RuntimeError):
    """Another publisher wrote an object since this one read it: nothing of ours replaced it."""


class LakeStoreError(RuntimeError):
    pass


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
    def url(self, key: str, *, absolute: bool = False) -> str:
        """What a reader opens: the file's path (absolute: resolved), or its s3:// URL."""

    @abstractmethod
    def prepare(self) -> None:
        """Before a publish writes anything: the folder exists (private), or the bucket answers."""

    @abstractmethod
    def read(self, key: str) -> tuple[bytes, str] | None:
        """The object's bytes and a version token (the ETag on S3), None when it does not exist."""

    @abstractmethod
    def create(self, key: str, data: bytes) -> None:
        """Write a new object; LakeConflict when it already exists (If-None-Match: *)."""

    @abstractmethod
    def replace(self, key: str, data: bytes, token: str | None) -> None:
        """Replace the object read with `token` (None: it did not exist); LakeConflict when it changed since."""

    @abstractmethod
    def staging(self, key: str) -> Path:
        """A local file for DuckDB to write the object to, before commit_file()."""

    @abstractmethod
    def commit_file(self, key: str, staged: Path) -> None:
        """Make the staged file the object `key`, durably; the staged file is gone afterwards."""

    def list(self, prefix: str) -> list[str]:
        """Every object key under prefix (a folder ending in '/'), sorted."""
        return sorted(self.sizes(prefix))

    @abstractmethod
    def sizes(self, prefix: str) -> dict[str, int]:
        """Every object key under prefix (a folder ending in '/') and its size in bytes: one listing."""

    @abstractmethod
    def delete(self, key: str) -> None: ...

    def tidy(self, tables: Iterable[str]) -> None:
        """Remove what a crashed writer left that is no object (empty folders, temporary manifests)."""
        return None

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        """Let a DuckDB connection read this store's url()s (a local path needs nothing)."""
        return None

    def close(self) -> None:
        """Remove local temporaries."""
        return None


class LocalStore(LakeStore):
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.root = str(self.path)

    def url(self, key: str, *, absolute: bool = False) -> str:
        path = self.path / key
        return str(path.resolve() if absolute else path)

    def prepare(self) -> None:
        private_dir(self.path)

    def read(self, key: str) -> tuple[bytes, str] | None:
        try:
            data = (self.path / key).read_bytes()
        except FileNotFoundError:
            return None
        return data, hashlib.sha256(data).hexdigest()

    def create(self, key: str, data: bytes) -> None:
        path = self.path / key
        private_dir(path.parent)
        if path.exists():
            raise LakeConflict(f"{path}: already exists (another publisher wrote it)")
        _write_atomically(path, data)

    def replace(self, key: str, data: bytes, token: str | None) -> None:
        # check-then-rename: on one machine the run lock already makes publishers take turns
        current = self.read(key)
        if (current[1] if current else None) != token:
            raise LakeConflict(f"{self.path / key}: changed since this publish read it (another publisher wrote it)")
        _write_atomically(self.path / key, data)

    def staging(self, key: str) -> Path:
        final = self.path / key
        private_dir(final.parent)
        tmp = final.with_name(final.name + ".tmp")
        tmp.unlink(missing_ok=True)
        return tmp

    def commit_file(self, key: str, staged: Path) -> None:
        replace_durably(staged, self.path / key)

    def sizes(self, prefix: str) -> dict[str, int]:
        folder = self.path / prefix
        if not folder.is_dir():
            return {}
        return {f.relative_to(self.path).as_posix(): f.stat().st_size for f in folder.rglob("*") if f.is_file()}

    def delete(self, key: str) -> None:
        (self.path / key).unlink()

    def tidy(self, tables: Iterable[str]) -> None:
        for table in tables:
            root = self.path / table
            if root.is_dir():
                for folder in sorted((p for p in root.iterdir() if p.is_dir()), reverse=True):
                    if not any(folder.iterdir()):
                        folder.rmdir()
        for leftover in [*self.path.glob("_manifest.json.tmp-*"), *(self.path / "_manifests").glob("*.tmp-*")]:
            leftover.unlink()  # a manifest a crashed publish was writing (the run lock: no other publish is live)


class S3Store(LakeStore):
    """An S3-compatible bucket (AWS S3, MinIO, R2) through boto3; DuckDB reads it through s3fs."""

    def __init__(self, uri: str) -> None:
        bucket, _, prefix = uri.removeprefix(S3_SCHEME).partition("/")
        if not bucket:
            raise LakeStoreError(f"{uri}: no bucket (expected s3://bucket/prefix)")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.root = f"{S3_SCHEME}{bucket}/{self.prefix}".rstrip("/")
        try:
            import boto3  # type: ignore[import-untyped]
            from botocore.exceptions import ClientError  # type: ignore[import-untyped]
        except ImportError:
            raise LakeStoreError(f"{uri}: a lake on S3 needs boto3 and s3fs ({INSTALL_HINT})") from None
        self._client_error = ClientError
        self.client: Any = boto3.client("s3")  # endpoint, credentials and region: the standard AWS variables
        self._staging_dir: Path | None = None
        self._lent: set[str] = set()  # the keys of _KNOWN_OBJECTS this store put there, forgotten by close()

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def url(self, key: str, *, absolute: bool = False) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self._key(key)}"

    def _code(self, exc: Exception) -> tuple[str, int]:
        response = getattr(exc, "response", {}) or {}
        return str(response.get("Error", {}).get("Code", "")), int(
            response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        )

    def _conflicted(self, exc: Exception) -> bool:
        # 412: the precondition failed; 409: a concurrent conditional write to the same key (AWS)
        code, status = self._code(exc)
        return status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict")

    def _missing(self, exc: Exception) -> bool:
        code, status = self._code(exc)
        return status == 404 or code in ("NoSuchKey", "404", "NotFound")

    def prepare(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except self._client_error as exc:
            code, status = self._code(exc)
            raise LakeStoreError(f"{self.root}: bucket {self.bucket!r} not reachable ({code or status})") from None

    def read(self, key: str) -> tuple[bytes, str] | None:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except self._client_error as exc:
            if self._missing(exc):
                return None
            raise
        return answer["Body"].read(), answer["ETag"]

    def create(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
        except self._client_error as exc:
            if self._conflicted(exc):
                raise LakeConflict(f"{self.url(key)}: already exists (another publisher wrote it)") from None
            raise

    def replace(self, key: str, data: bytes, token: str | None) -> None:
        condition = {"IfMatch": token} if token is not None else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, **condition)
        except self._client_error as exc:
            if self._conflicted(exc):
                raise LakeConflict(
                    f"{self.url(key)}: changed since this publish read it (another publisher wrote it)"
                ) from None
            raise

    def staging(self, key: str) -> Path:
        if self._staging_dir is None:
            self._staging_dir = Path(tempfile.mkdtemp(prefix="citegate-lake-"))  # 0700: prompts hold user data
        return self._staging_dir / key.replace("/", "__")

    def commit_file(self, key: str, staged: Path) -> None:
        size = staged.stat().st_size
        self.client.upload_file(str(staged), self.bucket, self._key(key))
        stored = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        if stored["ContentLength"] != size:
            raise LakeStoreError(f"{self.url(key)}: {stored['ContentLength']} bytes stored, {size} uploaded")
        self._know(key, size, stored["ETag"], stored["LastModified"])
        staged.unlink()

    def sizes(self, prefix: str) -> dict[str, int]:
        found = {}
        strip = len(self._key(""))
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
            for item in page.get("Contents", []):
                key = item["Key"][strip:]
                found[key] = item["Size"]
                self._know(key, item["Size"], item["ETag"], item["LastModified"])
        return found

    def _know(self, key: str, size: int, etag: str, modified: Any) -> None:
        """Lend what the bucket just said about an object to the s3fs filesystem (s3fs's own info format)."""
        name = f"{self.bucket}/{self._key(key)}"
        _KNOWN_OBJECTS[name] = {
            "ETag": etag,  # s3fs reads with If-Match on it: a replaced object fails rather than mixing versions
            "LastModified": modified,
            "size": size,
            "name": name,
            "type": "file",
            "StorageClass": "STANDARD",
            "VersionId": None,
            "ContentType": None,
        }
        self._lent.add(name)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        name = f"{self.bucket}/{self._key(key)}"
        _KNOWN_OBJECTS.pop(name, None)
        self._lent.discard(name)

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        register_s3(con)

    def close(self) -> None:
        if self._staging_dir is not None:
            shutil.rmtree(self._staging_dir, ignore_errors=True)
            self._staging_dir = None
        for name in self._lent:
            _KNOWN_OBJECTS.pop(name, None)
        self._lent.clear()


# "bucket/key" -> s3fs info of the lake objects an open S3Store listed or uploaded in this process. Lake objects
# are never modified (a changed partition is a new object), so what a listing said stays true until the object
# is deleted, which S3Store.delete() forgets here too.
_KNOWN_OBJECTS: dict[str, dict] = {}


def endpoint_url() -> str | None:
    """The S3 endpoint the AWS variables name (boto3 reads them itself; s3fs and polars are told)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def register_s3(con: duckdb.DuckDBPyConnection) -> None:
    """Let `con` read s3:// URLs in-process through s3fs (DuckDB's httpfs extension cannot be installed
    everywhere); the plain duckdb CLI uses httpfs instead (docs/object-storage.md)."""
    if "s3" in con.list_filesystems():
        return  # registered on this database instance already (DuckDB refuses a second one; it is shared)
    try:
        import s3fs  # type: ignore[import-untyped]
    except ImportError:
        raise LakeStoreError(f"reading a lake on S3 needs s3fs ({INSTALL_HINT})") from None

    class ImmutableObjects(s3fs.S3FileSystem):
        """The lake's objects are never modified, only added and deleted: a file's info (DuckDB asks for it
        many times per file) is fetched once, not one HEAD request per question, and not at all when an open
        S3Store has just listed or uploaded the object (_KNOWN_OBJECTS)."""

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
        use_listings_cache=False,  # a cached folder listing would hide a day file uploaded after it
    )
    con.register_filesystem(filesystem)


def register_for_views(con: duckdb.DuckDBPyConnection) -> None:
    """For a reader of the published file: register s3fs when a view names an s3:// object, else nothing."""
    [(found,)] = con.execute(
        "select count(*) from duckdb_views() where not internal and contains(sql, $scheme)", {"scheme": "'s3://"}
    ).fetchall()
    if found:
        register_s3(con)


def polars_storage_options() -> dict[str, str]:
    """storage_options for polars.scan_parquet on s3:// URLs, from the same AWS variables."""
    names = {"aws_access_key_id": "AWS_ACCESS_KEY_ID", "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY"}
    options = {option: os.environ[name] for option, name in names.items() if os.environ.get(name)}
    if region := os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"):
        options["aws_region"] = region
    if url := endpoint_url():
        options["aws_endpoint_url"] = url
        if url.startswith("http://"):
            options["aws_allow_http"] = "true"
    return options


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    tmp.write_bytes(data)
    replace_durably(tmp, path)
