"""Kill trials: `eoschaos run` killed with SIGKILL at random moments, then cleanup and re-check.

    .venv/bin/python scripts/kill_trials.py [--trials 50] [--seed 1] [--out DIR] [--json FILE]
        [--workload streams] [--backend containers]
        [--matrix chaos/matrices/ci.toml --run-seconds 200]

Each trial kills one run of `--workload` (kip447 by default; the runs of the nightly random
trials, tests/kill_trials.py RANDOM_RUN_ARGS) at a uniform moment over a whole run (cluster
start to report), then
runs `eoschaos cleanup RUN_DIR` and `eoschaos check RUN_DIR`, and measures what was left:
processes, containers and ports, the re-check's outcome, history lost per writer
(tests/kill_trials.py). With `--matrix FILE` each trial kills `eoschaos matrix FILE` instead,
cleans up, and resumes the same night, which must judge every cell run exactly once.
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

from kill_trials import RANDOM_RUN_ARGS, matrix_trial, random_trial, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workload", choices=list(RANDOM_RUN_ARGS), default="kip447")
    parser.add_argument("--run-seconds", type=float, help="a whole run, start to report")
    parser.add_argument("--out", type=Path, default=None, help="where the run dirs go")
    parser.add_argument("--json", type=Path, help="write every trial and the summary here")
    parser.add_argument("--backend", default="process", help="process or containers")
    parser.add_argument("--matrix", type=Path, help="kill `eoschaos matrix FILE` instead")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="eoschaos-kill-trials-"))
    rng = random.Random(args.seed)
    run_args, run_seconds = RANDOM_RUN_ARGS[args.workload]
    run_args = [*run_args, "--backend", args.backend]
    run_seconds = args.run_seconds or run_seconds
    trials = []
    for n in range(args.trials):
        where = out / f"trial-{n:03d}"
        if args.matrix:
            trial = matrix_trial(where, args.matrix, rng.uniform(0, run_seconds))
            after = f"resumed: exit {trial.resume_exit}, {len(trial.judged)} cell runs judged"
        else:
            trial = random_trial(where, rng, run_seconds, run_args=run_args)
            after = f"check exit {trial.check_exit} {trial.check_verdict or ''} "
            after += f"loss {trial.writer_loss_s}"
        trials.append(trial)
        outcome = "ok" if trial.ok else "PROBLEM " + "; ".join(trial.problems())
        moment = (
            f"finished before its kill at {trial.delay_s:.1f}s after start"
            if trial.finished_first
            else f"killed at {trial.killed_after_s:5.1f}s ({trial.phase_hit})"
        )
        print(f"trial {n + 1}/{args.trials}: {moment} -> {after} {outcome}", flush=True)
    result = summary(trials)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["with_problems"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
