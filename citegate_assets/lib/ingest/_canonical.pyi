# The compiled module lib/ingest/_canonical.c (built at install when a C compiler is there).
from typing import Any

class Column:
    """A canonical text column, taken once by polars through the Arrow PyCapsule interface."""

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[Any, Any]: ...

def canonical_column(stream: object, suspects: bytes) -> tuple[Column, list[int]]: ...
