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


@pytest.mark.parametrize("buffering", [0, -1])  # the landing opens files unbuffered (io.FileIO)
@pytest.mark.parametrize("chunk_bytes", [1, 3, 16, 1 << 20])
def test_a_file_read_into_one_reused_buffer_gives_the_lines_and_hash_of_a_fresh_read(
    monkeypatch, tmp_path, chunk_bytes, buffering
):
    # a file on disk is read into one buffer chunk after chunk: every line kept from an earlier chunk, and the hash,
    # must be what reading each chunk into fresh memory gives (io.BytesIO takes that path)
    monkeypatch.setattr(lines, "CHUNK_BYTES", chunk_bytes)
    rng = random.Random(7 * chunk_bytes)
    path = tmp_path / "log.jsonl"
    for _ in range(150):
        data = b"".join(
            bytes(rng.choice(b"ab\xc3\xa9 ") for _ in range(rng.randint(0, 40)))
            + rng.choice([b"\n", b"\n", b"\r\n", b"\r", b""])
            for _ in range(rng.randint(0, 25))
        )
        path.write_bytes(data)
        cap, final = rng.choice([2, 8, 10**6]), rng.choice([True, False])
        fresh, state = [], ReadState()
        for line in read_lines(io.BytesIO(data), state, max_line_bytes=cap, final=final):
            fresh.append((line, state.digest()))
        reused, reused_state = [], ReadState()
        with path.open("rb", buffering=buffering) as fh:
            assert isinstance(fh, io.FileIO if buffering == 0 else io.BufferedReader)
            for line in read_lines(fh, reused_state, max_line_bytes=cap, final=final):
                assert type(line.raw) is bytes
                # the hash read now and then: what is pending across chunks must be hashed before the buffer refills
                reused.append((line, reused_state.digest() if rng.random() < 0.1 else None))
        # compared after the last read: no kept line shares the buffer
        assert [line for line, _ in reused] == [line for line, _ in fresh]
        assert all(digest in (None, expected) for (_, digest), (_, expected) in zip(reused, fresh))
        assert (reused_state.consumed, reused_state.held_bytes, reused_state.digest()) == (
            state.consumed,
            state.held_bytes,
            state.digest(),
        )
