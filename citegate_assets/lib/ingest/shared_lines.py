"""A batch's line bytes handed to a parse worker through shared memory rather than pickled down a pipe.

Pickling a batch copies its bytes three times in the ingest process and twice in the worker, and each copy lands in
freshly mapped pages: about 1.7 CPU-s per 660 MB of lines, a tenth of a day's ingest. Here the ingest process copies
each line once into a region it reuses (a Linux memfd, so its pages stay mapped), and the worker reads the lines out
of its own mapping of the same region, which it opens through /proc/<ingest pid>/fd. A memfd has no name: nothing is
left behind when either process dies, however it dies.

Where there is no memfd (not Linux) or a worker cannot open the region (a /proc it may not read), batches are
pickled with their bytes: `SharedLines.usable` is then False.
"""

from __future__ import annotations

import mmap
import os
import uuid
from dataclasses import dataclass

__all__ = ["Lease", "LineRegion", "RegionUnavailable", "SharedLines", "ShippedLines", "read_shipped", "stripped"]


class RegionUnavailable(Exception):
    """A worker could not map the ingest process's region: the batch is parsed from its pickled lines instead."""


@dataclass(frozen=True)
class ShippedLines:
    """Where a batch's lines stand in a region: the region's owner and descriptor, a token naming this region (a
    descriptor number is reused once closed), its size, and each line's [start, end)."""

    pid: int
    fd: int
    token: str
    size: int
    spans: tuple[tuple[int, int], ...]


class LineRegion:
    """One reusable region of shared memory, owned by the ingest process."""

    def __init__(self, size: int):
        self.size = size
        self.fd = os.memfd_create("citegate-batch", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        self.token = uuid.uuid4().hex

    def fill(self, raws: list[bytes]) -> ShippedLines:
        spans = []
        at = 0
        view = self.map
        for raw in raws:
            end = at + len(raw)
            view[at:end] = raw
            spans.append((at, end))
            at = end
        return ShippedLines(os.getpid(), self.fd, self.token, self.size, tuple(spans))

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


class Lease:
    """A region lent to one batch: returned to its SharedLines once the batch is parsed (the worker copies the
    lines out as it starts)."""

    def __init__(self, owner: SharedLines, region: LineRegion, shipped: ShippedLines):
        self.owner, self.region, self.shipped = owner, region, shipped

    def release(self) -> None:
        self.owner.give_back(self.region)

    def refused(self) -> None:
        """The worker could not map the region: no later batch is sent through one."""
        self.owner.usable = False
        self.release()


class SharedLines:
    """The ingest process's regions: one per batch in flight, each reused once its batch is parsed."""

    def __init__(self) -> None:
        self.usable = hasattr(os, "memfd_create") and os.path.isdir(f"/proc/{os.getpid()}/fd")
        self._free: list[LineRegion] = []
        self._all: list[LineRegion] = []

    def lend(self, raws: list[bytes]) -> Lease | None:
        """The lines copied into a free region (a new or larger one when none fits), or None when shared memory is
        not usable here: the batch is then pickled with its bytes."""
        if not self.usable:
            return None
        nbytes = sum(len(raw) for raw in raws)
        region = next((r for r in self._free if r.size >= nbytes), None)
        if region is None:
            if self._free:  # too small for this batch: replaced by a larger one
                self._discard(self._free[-1])
            try:
                region = LineRegion(_room_for(nbytes))
            except OSError:
                self.usable = False
                return None
            self._all.append(region)
        else:
            self._free.remove(region)
        return Lease(self, region, region.fill(raws))

    def give_back(self, region: LineRegion) -> None:
        """A lent region is free again: its batch is parsed."""
        self._free.append(region)

    def _discard(self, region: LineRegion) -> None:
        self._free.remove(region)
        self._all.remove(region)
        region.close()

    def close(self) -> None:
        """Every region closed (the workers are done with them: the pool is shut down first)."""
        for region in self._all:
            region.close()
        self._all.clear()
        self._free.clear()


def _room_for(nbytes: int) -> int:
    """A new region's size: a quarter more than the batch, so the batches after it (about as large) reuse it
    rather than each map, and fault in, pages of its own."""
    return max(nbytes + nbytes // 4, 1 << 20)


# a worker's mappings of the regions it was sent, by token: a region is reused for batch after batch
_mapped: dict[str, mmap.mmap] = {}
# the least recently used mapping is closed past this many: a mapping keeps its region's pages alive after the ingest
# process replaced the region by a larger one, and at most `workers` + 1 regions are in use at once
_MAPPED_AT_MOST = 8


def read_shipped(shipped: ShippedLines, lines: list) -> list:
    """In a worker: the batch's lines (BatchLine with an empty Line.raw) with their bytes read out of the region."""
    region = _mapped.pop(shipped.token, None)  # put back last: the most recently used
    if region is None:
        try:
            fd = os.open(f"/proc/{shipped.pid}/fd/{shipped.fd}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise RegionUnavailable(f"cannot open the ingest process's batch region: {exc}") from exc
        try:
            region = mmap.mmap(fd, shipped.size, prot=mmap.PROT_READ)
        except (OSError, ValueError) as exc:
            raise RegionUnavailable(f"cannot map the ingest process's batch region: {exc}") from exc
        finally:
            os.close(fd)
        while len(_mapped) >= _MAPPED_AT_MOST:
            _mapped.pop(next(iter(_mapped))).close()
    _mapped[shipped.token] = region
    return [bl.with_raw(region[start:end]) for bl, (start, end) in zip(lines, shipped.spans)]


def stripped(lines: list) -> list:
    """The batch's lines without their bytes (what is pickled when the bytes travel through a region)."""
    return [bl.with_raw(b"") for bl in lines]
