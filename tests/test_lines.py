"""The line reader's hash: after every line handed out, `digest()` is the sha256 of exactly the bytes consumed."""

import hashlib
import io
import random

import pytest

from citegate_assets.lib.core import lines
from citegate_assets.lib.core.lines import ReadState, read_lines


@pytest.mark.parametrize("chunk_bytes", [1, 3, 16, 1 << 20])
def test_digest_is_sha256_of_the_bytes_consumed_after_every_line(monkeypatch, chunk_bytes):
    # whole lines are hashed a chunk's worth at a time, lazily: any read of the hash must see every line given out
    monkeypatch.setattr(lines, "CHUNK_BYTES", chunk_bytes)
    rng = random.Random(chunk_bytes)
    for _ in range(300):
        data = b"".join(
            bytes(rng.choice(b"ab\xc3\xa9 ") for _ in range(rng.randint(0, 30)))
            + rng.choice([b"\n", b"\r\n", b"\r", b""])
            for _ in range(rng.randint(0, 20))
        )
        state = ReadState()
        for line in read_lines(io.BytesIO(data), state, max_line_bytes=rng.choice([2, 8, 10**6]), final=True):
            assert line.end == state.consumed
            assert state.digest() == hashlib.sha256(data[: state.consumed]).hexdigest()
        assert state.digest() == hashlib.sha256(data[: state.consumed]).hexdigest()
