"""Kill trials: `eoschaos run` killed with SIGKILL at random moments, then cleanup and re-check.

    .venv/bin/python scripts/kill_trials.py [--trials 50] [--seed 1] [--out DIR] [--json FILE]

Each trial kills one run at a uniform moment over a whole run (cluster start to report), then
runs `eoschaos cleanup RUN_DIR` and `eoschaos check RUN_DIR`, and measures what was left:
processes and ports, the re-check's outcome, history lost per writer (tests/kill_trials.py).
Prints one line per trial and a summary; exits 1 if any trial left something or lost history.
Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from kill_trials import RUN_ARGS, RUN_SECONDS, random_trial, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--run-seconds", type=float, default=RUN_SECONDS)
    parser.add_argument("--out", type=Path, default=None, help="where the run dirs go")
    parser.add_argument("--json", type=Path, help="write every trial and the summary here")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="eoschaos-kill-trials-"))
    rng = random.Random(args.seed)
    trials = []
    for n in range(args.trials):
        trial = random_trial(out / f"trial-{n:03d}", rng, args.run_seconds, run_args=RUN_ARGS)
        trials.append(trial)
        outcome = "ok" if trial.ok else "PROBLEM " + "; ".join(trial.problems())
        moment = (
            f"finished before its kill at {trial.delay_s:.1f}s after cluster start"
            if trial.finished_first
            else f"killed at {trial.killed_after_s:5.1f}s ({trial.phase_hit})"
        )
        print(
            f"trial {n + 1}/{args.trials}: {moment} -> check exit {trial.check_exit} "
            f"{trial.check_verdict or ''} "
            f"loss {trial.writer_loss_s} {outcome}",
            flush=True,
        )
    result = summary(trials)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["with_problems"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
