# The compiled module lib/ingest/_canonical.c (built at install when a C compiler is there).
from typing_extensions import Buffer

def canonical(
    data: Buffer, offsets: Buffer, suspects: Buffer, out_data: Buffer, out_offsets: Buffer
) -> tuple[int, list[int]]: ...
