"""Kill trials: `eoschaos run` killed with SIGKILL at a chosen moment, as a CI job's timeout
would. Then `eoschaos cleanup RUN_DIR` and `eoschaos check RUN_DIR` run, and the trial measures
what a user is left with:
- processes of the run still alive (brokers, Toxiproxy, instances, Spark), found by the run
  directory in their command line, environment or working directory;
- ports still listening that were not listening before the run;
- what the re-check says: a verdict (UNKNOWN/FAIL for an unfinished run, any for a finished
  one) or exit 2 with one line, never a traceback;
- every address a process of the run listened on while it ran (sampled): loopback only;
- how much history each writer of the killed process lost: the time from its last recorded
  event to the kill, for writers that were writing when it came and had records left to
  write about (the bound is the writer's flush interval, 0.5 s).

Used by tests/test_kill_trials.py (a few fixed moments in CI, random ones nightly) and by
scripts/kill_trials.py (many random trials, the figures in docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from commandline import run_eoschaos
from listening import descendants, is_loopback, listening_addresses, listening_sockets

# A short kip447 eos run with a broker kill: cluster ~15 s, workload 20 s, then final scans,
# compaction and the check.
RUN_ARGS = ["--workload", "kip447", "--mode", "eos", "--faults", "kill", "--duration", "20"]
RUN_ARGS += ["--records", "2400", "--seed", "7"]
RUN_SECONDS = 75.0  # start to report, measured on the 2-core machine
# Phases of a run as its progress lines announce them, in order: (phase, the line's start).
PHASES = [
    ("cluster start", "[eoschaos] run dir:"),
    ("workload", "[eoschaos] workload "),
    # the history is whole from here: the batch headers (evidence only) are recorded next
    ("log batches", "[eoschaos] final scans and end state recorded"),
    ("compaction", "[eoschaos] compacting the history"),
    ("checking", "[eoschaos] checking the history"),
]
ACTIVE_WITHIN_S = 1.0  # a writer with an event this close to the kill was writing when it came
LEFTOVER_GRACE_S = 15.0  # orphans that watch their parent exit on their own within this
IN_PROCESS_WRITERS = ("seeder", "observer", "nemesis")
LISTEN_SAMPLE_S = 0.5  # how often the run's processes' listening sockets are read


@dataclass
class Trial:
    """One kill and what it left."""

    moment: str  # the phase aimed at ("random": a uniform time over the run)
    delay_s: float  # after the phase's progress line (or after start, for "random")
    run_dir: str
    phase_hit: str = ""  # the phase the run was in when killed
    killed_after_s: float = 0.0
    finished_first: bool = False  # the run ended before the kill came
    leftover_processes: list[str] = field(default_factory=list)
    leftover_ports: list[int] = field(default_factory=list)
    cleanup_exit: int | None = None
    check_exit: int | None = None
    check_verdict: str | None = None
    check_complete: bool | None = None
    check_last_line: str = ""
    check_traceback: bool = False
    writer_loss_s: dict[str, float] = field(default_factory=dict)
    listened_on: list[str] = field(default_factory=list)  # every address seen while it ran

    @property
    def ok(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        found = []
        if self.leftover_processes:
            found.append(f"processes left: {self.leftover_processes}")
        outside = [address for address in self.listened_on if not is_loopback(address)]
        if outside:
            found.append(f"listened beyond loopback: {outside}")
        if self.leftover_ports:
            found.append(f"ports still listening: {self.leftover_ports}")
        if self.check_traceback:
            found.append(f"the re-check printed a traceback: {self.check_last_line}")
        if self.check_exit == 2 and not self.check_last_line.startswith("eoschaos: error: "):
            found.append(f"exit 2 without one error line: {self.check_last_line}")
        if self.check_exit not in (0, 1, 2, 3):
            found.append(f"re-check exit {self.check_exit}: {self.check_last_line}")
        if self.check_verdict == "PASS" and not self.check_complete:
            found.append("an incomplete history read as PASS")
        if self.check_exit == 0 and self.phase_hit in ("cluster start", "workload"):
            found.append(f"a run killed during {self.phase_hit} re-checked as PASS")
        lost = {writer: s for writer, s in self.writer_loss_s.items() if s > 0.5 + 0.25}
        if lost:
            found.append(f"history lost beyond the 0.5 s flush interval: {lost}")
        return found


def run_trial(
    run_dir: Path,
    moment: str,
    delay_s: float,
    run_args: list[str],
    env: dict[str, str] | None = None,
    deadline_s: float = 600.0,
) -> Trial:
    """Start `eoschaos run RUN_ARGS --out RUN_DIR`, SIGKILL it `delay_s` after the progress
    line of phase `moment` (or after start, for moment "random"), clean up, re-check."""
    trial = Trial(moment, round(delay_s, 2), str(run_dir))
    ports_before = _listening_ports()
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "eoschaos.cli", "run", *run_args, "--out", str(run_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    seen: dict[str, float] = {}  # phase -> when its line came
    reader = threading.Thread(target=_follow, args=(child, seen, started), daemon=True)
    reader.start()
    aim = "cluster start" if moment == "random" else moment
    listened: set[str] = set()
    sampled = 0.0
    while child.poll() is None and time.monotonic() - started < deadline_s:
        if aim in seen and time.monotonic() - started >= seen[aim] + delay_s:
            break
        if time.monotonic() - sampled > LISTEN_SAMPLE_S:
            sampled = time.monotonic()
            for addresses in listening_addresses([child.pid, *descendants(child.pid)]).values():
                listened.update(addresses)
        time.sleep(0.02)
    trial.listened_on = sorted(listened)
    if child.poll() is None:
        child.send_signal(signal.SIGKILL)
        killed_wall = time.time()
        trial.killed_after_s = round(time.monotonic() - started, 2)
    else:
        trial.finished_first = True
        killed_wall = time.time()
    child.wait()
    reader.join(timeout=5)
    trial.phase_hit = max(seen, key=seen.get) if seen else "before any progress"
    trial.writer_loss_s = _writer_loss(run_dir, killed_wall, _records(run_args))
    cleanup = run_eoschaos("cleanup", str(run_dir), env=env)
    trial.cleanup_exit = cleanup.returncode
    trial.leftover_processes = _await_leftovers(run_dir)
    trial.leftover_ports = sorted(_listening_ports() - ports_before)
    check = run_eoschaos("check", str(run_dir), env=env)
    lines = check.stderr.strip().splitlines()
    trial.check_exit = check.returncode
    trial.check_last_line = lines[-1] if lines else ""
    trial.check_traceback = "Traceback (most recent call last)" in check.stderr
    verdict_file = run_dir / "verdict.json"
    if check.returncode in (0, 1, 3) and verdict_file.exists():
        verdict = json.loads(verdict_file.read_text())
        trial.check_verdict, trial.check_complete = verdict["verdict"], verdict["complete"]
    return trial


def random_trial(run_dir: Path, rng: random.Random, run_seconds: float, **kwargs) -> Trial:
    """A kill at a uniform moment over a whole run of `run_seconds` (start to report)."""
    return run_trial(run_dir, "random", rng.uniform(0, run_seconds), **kwargs)


def summary(trials: list[Trial]) -> dict:
    hits: dict[str, int] = {}
    for trial in trials:
        hits[trial.phase_hit] = hits.get(trial.phase_hit, 0) + 1
    losses = [s for trial in trials for s in trial.writer_loss_s.values()]
    return {
        "trials": len(trials),
        "phases_hit": hits,
        "with_problems": sum(not trial.ok for trial in trials),
        "leftover_processes": sum(len(trial.leftover_processes) for trial in trials),
        "leftover_ports": sum(len(trial.leftover_ports) for trial in trials),
        "check_exits": sorted({t.check_exit for t in trials if t.check_exit is not None}),
        "max_writer_loss_s": max(losses, default=0.0),
        "problems": {trial.run_dir: trial.problems() for trial in trials if not trial.ok},
        "runs": [asdict(trial) for trial in trials],
    }


def _follow(child: subprocess.Popen, seen: dict[str, float], started: float) -> None:
    assert child.stderr is not None
    for line in child.stderr:
        for phase, start in PHASES:
            if line.startswith(start) and phase not in seen:
                seen[phase] = time.monotonic() - started


def _writer_loss(run_dir: Path, killed_wall: float, records: int | None) -> dict[str, float]:
    """Writer of the killed process -> seconds from its last recorded event to the kill, for
    writers that recorded something within ACTIVE_WITHIN_S of it and had work left: a writer
    whose events already name every record (the seeder sent them all, the observer read them
    all) went quiet because it was done, not because its events were lost."""
    loss = {}
    for writer in IN_PROCESS_WRITERS:
        path = run_dir / "history" / f"{writer}.jsonl"
        last = _last_time(path)
        if last is None or killed_wall - last > ACTIVE_WITHIN_S:
            continue
        if records is not None and len(_ids(path)) >= records:
            continue
        loss[writer] = round(max(0.0, killed_wall - last), 3)
    return loss


def _records(run_args: list[str]) -> int | None:
    return int(run_args[run_args.index("--records") + 1]) if "--records" in run_args else None


def _ids(path: Path) -> set[int]:
    ids = set()
    for line in path.read_bytes().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a cut-short last line
        if isinstance(event, dict) and isinstance(event.get("id"), int):
            ids.add(event["id"])
    return ids


def _last_time(path: Path) -> float | None:
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - 65536))
            tail = handle.read().splitlines()
    except OSError:
        return None
    for line in reversed(tail):
        try:
            return float(json.loads(line)["time"])
        except (ValueError, KeyError, TypeError):
            continue  # a cut-short last line
    return None


def _await_leftovers(run_dir: Path) -> list[str]:
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while True:
        left = processes_of(run_dir)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def processes_of(run_dir: Path) -> list[str]:
    """Live processes naming the run directory in their command line, environment or cwd."""
    needle = str(run_dir.resolve()).encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        if int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            named = needle in cmdline or needle in (proc / "environ").read_bytes()
            named = named or os.readlink(proc / "cwd").encode().startswith(needle)
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if named and state != "Z":
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")[:80]
            found.append(f"{proc.name}:{command}")
    return found


def _listening_ports() -> set[int]:
    """Every TCP port listening on this machine (any process)."""
    return {int(address.rsplit(":", 1)[1]) for address, _ in listening_sockets()}
