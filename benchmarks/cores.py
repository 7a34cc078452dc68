"""What two processes buy on this machine: the same pure-Python work (a dict loop, like the offline judge's) in one
process, then in two at once; throughput = 2 x alone / both. `--workers 2` cannot split the night better than this.

    python -m benchmarks.cores [--repeats 3]"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time

LOOPS = 6_000_000


def work(n: int = LOOPS) -> float:
    t0 = time.perf_counter()
    d: dict[int, int] = {}
    for i in range(n):
        d[i % 1000] = d.get(i % 1000, 0) + i
    return time.perf_counter() - t0


def measure(repeats: int = 3) -> list[float]:
    """Throughput of two processes over one, per repeat."""
    out = []
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(work, [1000, 1000])  # started and imported before timing
        for _ in range(repeats):
            alone = work()
            t0 = time.perf_counter()
            pool.map(work, [LOOPS, LOOPS])
            out.append(2 * alone / (time.perf_counter() - t0))
        # closed and joined, not terminated: a terminating pool may start a worker that waits forever on its queue
        pool.close()
        pool.join()
    return out


def render(ratios: list[float]) -> str:
    return "two processes against one (pure Python): " + ", ".join(f"{r:.2f}x" for r in ratios)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    print(render(measure(p.parse_args(argv).repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
