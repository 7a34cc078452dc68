# The compiled module lib/ingest/_canonical.c (built at install when a C compiler is there).
from typing_extensions import Buffer

def canonical(data: Buffer, offsets: Buffer, suspects: Buffer) -> tuple[bytes, bytes, list[int]]: ...
