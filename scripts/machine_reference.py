"""A fixed amount of CPU work on every core, timed: the reference a wall time is read against.

The same CI set has taken 33 to 60 minutes on this class of machine, and a 10M-record verdict
twice as long on one day as on another, with no change of code: the host's speed varies. Printed
before and after the tests (scripts/test.sh), this figure tells a slower machine from slower
code: a CI time is comparable to another when their references are.

    python scripts/machine_reference.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

WORK = 10_000_000  # loop iterations per core


def _spin(iterations: int) -> int:
    """Integer arithmetic and a small dict, the interpreter's everyday work; the result is
    returned so nothing is optimised away."""
    total, table = 0, {}
    for i in range(iterations):
        total = (total * 31 + i) % 1_000_003
        table[i & 1023] = total
    return total + len(table)


def one_round(cores: int) -> float:
    """Seconds for every core to finish its share, the cores side by side."""
    with ProcessPoolExecutor(cores) as pool:
        start = time.perf_counter()
        list(pool.map(_spin, [WORK] * cores))
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds timed; the median counts")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    seconds = statistics.median(one_round(cores) for _ in range(max(1, args.rounds)))
    print(f"machine reference: {WORK:,} loop steps on each of {cores} cores in {seconds:.2f} s")


if __name__ == "__main__":
    main()
