# The compiled module lib/ingest/_locate.c (built at install when a C compiler is there).

from re import Pattern

def configure(
    min_prefix: int,
    probe: int,
    max_gap: int,
    hint_window: int,
    id_window: int,
    call_chars: int,
    max_openings: int,
    compare_block: int,
    head: int,
    head_tries: int,
    position_hint: Pattern[str],
    region: type,
) -> None: ...
def locate(
    prompt: str, chunks: list[tuple[str, str]], lo: int, hi: int, budget: int
) -> tuple[list, dict[str, int], dict[str, int] | None, set[str] | None, dict[str, str] | None, int, bool]: ...
def find(prompt: str, text: str, at: int, hi: int) -> int: ...
