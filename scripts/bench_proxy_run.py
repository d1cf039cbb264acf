"""Benchmark: the README run with the Kafka protocol proxy in the path, against the run without.

    .venv/bin/python scripts/bench_proxy_run.py [--rounds 2] [-- RUN ARGS...]

Runs `eoschaos run` with the given arguments (default: the README run, scripts/run.sh's) and
the same run with `--protocol-proxy`, taking turns `--rounds` times so both meet the same
machine. Each run's own verdict gives what is compared: committed output records per second
of the run's timeline, and the realtime lag (a record's first read minus its acknowledged send)
p99 and worst. The seeder sends at the rate `--records` over `--duration` sets, so a path that
keeps up shows the same records per second and any cost as lag. Prints one row per run and
each side's median. Numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

README_RUN = ["--workload", "kip447", "--mode", "eos", "--faults", "kill,crash,zombie,latency"]
README_RUN += ["--duration", "60", "--seed", "1"]
SIDES = {"Toxiproxy": [], "Toxiproxy + protocol proxy": ["--protocol-proxy"]}


def _run(run_args: list[str], out: Path) -> dict[str, Any]:
    """One `eoschaos run`; its verdict's throughput and lag figures."""
    eoschaos = Path(sys.executable).parent / "eoschaos"
    done = subprocess.run([str(eoschaos), "run", *run_args, "--out", str(out)], check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"eoschaos run exited {done.returncode}; see {out}")
    verdict = json.loads((out / "verdict.json").read_text())
    seconds = verdict["timeline"]["end"] - verdict["timeline"]["start"]
    lag = verdict["stats"]["realtime_lag"]
    return {
        "verdict": verdict["verdict"],
        "records_per_s": verdict["stats"]["output_committed"] / seconds,
        "lag_p99_s": lag["p99_s"],
        "lag_worst_s": lag["worst_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("run_args", nargs="*", help="`eoschaos run` arguments, after --")
    args = parser.parse_args()
    run_args = args.run_args or README_RUN
    figures: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="eoschaos-bench-proxy-run-") as work:
        for number in range(args.rounds):
            for side, extra in SIDES.items():
                out = Path(work) / f"{number}-{len(extra)}"
                row = _run([*run_args, *extra], out)
                figures[side].append(row)
                print(f"round {number + 1}, {side}: {json.dumps(row)}", flush=True)
    print(f"`eoschaos run {' '.join(run_args)}`, {args.rounds} rounds; medians:")
    for side, rows in figures.items():
        medians = {
            name: round(statistics.median(row[name] for row in rows), 3)
            for name in ("records_per_s", "lag_p99_s", "lag_worst_s")
        }
        print(f"  {side}: {medians}, verdicts {[row['verdict'] for row in rows]}")


if __name__ == "__main__":
    main()
