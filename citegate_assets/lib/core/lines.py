"""Complete lines of a log file, streamed with bounded memory, and the sha256 of exactly the bytes consumed.

A line ends at LF, CRLF or a lone CR. A last line without its end is held back (a writer may be in
the middle of it) unless the file is final. A line longer than the cap is reported by its length and
its first bytes, without ever being held whole; a compressed file that inflates past its bound stops.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

CHUNK_BYTES = 1 << 20
RAW_KEEP_BYTES = 64 * 1024  # what a reject row keeps of an oversized line
FINGERPRINT_BYTES = 4096  # a file is known by (at most) this much of its first line
_EOL = re.compile(rb"\r\n?|\n")
READ_ERRORS = (EOFError, OSError, zlib.error, gzip.BadGzipFile)
Stream = BinaryIO | gzip.GzipFile  # a landing file as stored, or its decompressed content
Chunk = bytes | bytearray  # what a read gives: a file on disk is read into one reused buffer


class PrefixChanged(Exception):
    """The bytes consumed on an earlier run are not the file's first bytes any more."""


class DecompressedTooLarge(Exception):
    pass


@dataclass
class Line:
    no: int  # 1-based line number in the (decompressed) file
    raw: bytes  # without its end; for an oversized line, its first RAW_KEEP_BYTES
    end: int  # offset just after this line's end: the bytes consumed once it is
    length: int  # the line's full length without its end
    too_long: bool = False


@dataclass
class ReadState:
    """What a reader has consumed; `digest()` is the sha256 of bytes [0, consumed)."""

    consumed: int = 0
    lines: int = 0
    held_bytes: int = 0  # an unterminated tail left for a later run
    inflated: int = 0  # bytes read from the (decompressed) stream
    _hasher: hashlib._Hash = field(default_factory=hashlib.sha256, repr=False)
    # consumed bytes not hashed yet: (chunk, start, end), hashed in one call as soon as anything reads the hash
    _pending: tuple[memoryview, int, int] | None = field(default=None, repr=False, compare=False)

    @property
    def hasher(self) -> hashlib._Hash:
        """The hash of bytes [0, consumed)."""
        if self._pending is not None:
            view, start, end = self._pending
            self._pending = None
            self._hasher.update(view[start:end])
        return self._hasher

    @hasher.setter
    def hasher(self, value: hashlib._Hash) -> None:
        """value covers every consumed byte (a line's copy, taken after what was pending was hashed)."""
        self._hasher = value
        self._pending = None

    def consume(self, view: memoryview, start: int, end: int) -> None:
        """Bytes [start, end) of a chunk were consumed: hashed with the lines around them in one update. An update
        per line releases and retakes the GIL each time, which costs the busy ingest process more than the hash."""
        pending = self._pending
        if pending is not None and pending[0] is view and pending[2] == start:
            self._pending = (view, pending[1], end)
        else:
            self.hasher  # noqa: B018 — reading it hashes what was pending
            self._pending = (view, start, end)

    def digest(self) -> str:
        return self.hasher.hexdigest()


def open_stream(fh: BinaryIO, compressed: bool) -> Stream:
    return gzip.GzipFile(fileobj=fh, mode="rb") if compressed else fh


class _Current:
    """The line being read: its first bytes (bounded), its length so far, the hash through its bytes."""

    def __init__(self, state: ReadState, cap: int):
        self.cap = cap
        self.state = state
        self.head = bytearray()
        self.length = 0
        # a copy of the consumed bytes' hash, taken when the line's first bytes arrive
        self.hasher: hashlib._Hash | None = None

    def absorb(self, seg: Chunk) -> None:
        if self.hasher is None:
            self.hasher = self.state.hasher.copy()
        self.hasher.update(seg)
        self.length += len(seg)
        room = self.cap + 2 - len(self.head)  # + 2: its end (CRLF) may follow the cap
        if room > 0:
            self.head += seg[:room]

    def finish(self, state: ReadState, end_len: int) -> Line:
        body_len = self.length - end_len
        if self.hasher is not None:
            state.hasher = self.hasher
        state.consumed += self.length
        state.lines += 1
        too_long = body_len > self.cap
        raw = bytes(self.head[: RAW_KEEP_BYTES if too_long else body_len])
        return Line(state.lines, raw, state.consumed, body_len, too_long)


def read_lines(
    stream: Stream,
    state: ReadState,
    *,
    max_line_bytes: int,
    max_inflated_bytes: int | None = None,
    final: bool = False,
    verify: tuple[int, int, str] | None = None,
) -> Iterator[Line]:
    """Yield each complete line after the verified prefix; `state` always describes the lines yielded so far.

    verify = (bytes, lines, sha256) consumed on an earlier run: those bytes are hashed, compared (PrefixChanged
    if they differ) and skipped. A damaged compressed stream raises one of READ_ERRORS after every complete
    line before the damage was yielded; DecompressedTooLarge past max_inflated_bytes.
    """
    if verify:
        _verify_prefix(stream, state, *verify)
    cur = _Current(state, max_line_bytes)
    cr_at_end = False  # the last chunk ended in CR: CRLF or a lone CR, the next chunk tells
    chunks = _Chunks(stream, state, max_inflated_bytes)
    while chunk := chunks.next():
        view = memoryview(chunk)
        pos = 0
        if cr_at_end:
            cr_at_end = False
            if chunk[:1] == b"\n":
                cur.absorb(b"\n")
                pos = 1
                yield cur.finish(state, 2)
            else:
                yield cur.finish(state, 1)
            cur = _Current(state, max_line_bytes)
        for m in _line_ends(chunk, pos):
            end = m.end()
            if m.group() == b"\r" and end == len(chunk):
                cur.absorb(chunk[pos:end])
                pos = end
                cr_at_end = True
                break
            if cur.length == 0 and m.start() - pos <= max_line_bytes:
                # the common case, a whole line inside this chunk: no copy into the line buffer
                state.consume(view, pos, end)
                state.consumed += end - pos
                state.lines += 1
                # bytes of their own: the chunk may be a buffer the next read overwrites
                yield Line(state.lines, bytes(view[pos : m.start()]), state.consumed, m.start() - pos)
                pos = end
                cur.hasher = None
                continue
            cur.absorb(chunk[pos:end])
            pos = end
            yield cur.finish(state, end - m.start())
            cur = _Current(state, max_line_bytes)
        else:
            if pos < len(chunk):
                cur.absorb(chunk[pos:])
    if cur.length:
        if final:
            yield cur.finish(state, 1 if cr_at_end else 0)
        else:
            state.held_bytes = cur.length


class _LF:
    """A match-like line end found by bytes.find: LF-only chunks (the usual case) skip the regex."""

    __slots__ = ("_at",)

    def __init__(self, at: int):
        self._at = at

    def start(self) -> int:
        return self._at

    def end(self) -> int:
        return self._at + 1

    def group(self) -> bytes:
        return b"\n"


def _line_ends(chunk: Chunk, pos: int):
    if b"\r" in chunk:
        yield from _EOL.finditer(chunk, pos)
        return
    while (at := chunk.find(b"\n", pos)) >= 0:
        yield _LF(at)
        pos = at + 1


class _Chunks:
    """The stream's next chunk, each time. A file on disk is read into one buffer, reused chunk after chunk: a fresh
    1 MiB object per read landed in pages the allocator had handed back to the kernel (DuckDB's writer calls
    malloc_trim), and faulting them in again cost more than the read (~0.25 CPU-s per 660 MB)."""

    def __init__(self, stream: Stream, state: ReadState, bound: int | None):
        self.stream, self.state, self.bound = stream, state, bound
        self.file = stream if isinstance(stream, (io.FileIO, io.BufferedReader)) else None
        self.buffer = bytearray(CHUNK_BYTES if self.file is not None else 0)

    def next(self) -> Chunk:
        chunk: Chunk
        if self.file is None:
            # read1: a damaged gzip stream then loses only the bytes of its last step, not a whole chunk of good lines
            stream = self.stream
            chunk = stream.read1(CHUNK_BYTES) if isinstance(stream, gzip.GzipFile) else stream.read(CHUNK_BYTES)
            n = len(chunk)
        else:
            self.state.hasher  # noqa: B018 — the bytes consumed so far are hashed before the buffer is overwritten
            n = self.file.readinto(self.buffer) or 0
            chunk = self.buffer if n == len(self.buffer) else bytes(memoryview(self.buffer)[:n])
        self.state.inflated += n
        if self.bound is not None and self.state.inflated > self.bound:
            raise DecompressedTooLarge(f"decompresses to more than {self.bound:,} bytes")
        return chunk


def _verify_prefix(stream: Stream, state: ReadState, nbytes: int, nlines: int, sha: str) -> None:
    remaining = nbytes
    while remaining > 0:
        block = stream.read(min(CHUNK_BYTES, remaining))
        if not block:
            raise PrefixChanged(f"it is now shorter than the {nbytes:,} bytes read before")
        state.inflated += len(block)
        state.hasher.update(block)
        remaining -= len(block)
    if state.hasher.hexdigest() != sha:
        raise PrefixChanged("its first bytes differ from those read before")
    state.consumed, state.lines = nbytes, nlines


def prefix_matches(stream: Stream, nbytes: int, sha: str) -> bool:
    """Are the stream's first nbytes those whose sha256 is `sha`? (False when it is shorter.)"""
    try:
        _verify_prefix(stream, ReadState(), nbytes, 0, sha)
    except PrefixChanged:
        return False
    return True


def first_line_fingerprint(stream: Stream, final: bool) -> str | None:
    """sha256 of the file's first line (at most FINGERPRINT_BYTES of it); None while that is still being written."""
    head = bytearray()
    while len(head) <= FINGERPRINT_BYTES:
        block = stream.read(FINGERPRINT_BYTES + 1 - len(head))
        if not block:
            break
        head += block
        m = _EOL.search(head)
        if m is not None:
            return hashlib.sha256(bytes(head[: min(m.start(), FINGERPRINT_BYTES)])).hexdigest()
    if len(head) > FINGERPRINT_BYTES or (final and head):
        return hashlib.sha256(bytes(head[:FINGERPRINT_BYTES])).hexdigest()
    return None
