"""Kill trials: `eoschaos run` killed with SIGKILL at a chosen moment, as a CI job's timeout
would. Then `eoschaos cleanup RUN_DIR` and `eoschaos check RUN_DIR` run, and the trial measures
what a user is left with:
- processes of the run still alive (brokers, Toxiproxy, instances, Spark), found by the run
  directory in their command line, environment or working directory;
- ports still listening that were not listening before the run, unless a process tree that
  was running before the trial holds them (MachineBefore);
- what the re-check says: a verdict (UNKNOWN/FAIL for an unfinished run, any for a finished
  one) or exit 2 with one line, never a traceback;
- every address a process of the run listened on while it ran (sampled): loopback only;
- how much history each writer of the killed process lost: the time from its last recorded
  event to the kill, for writers that were writing when it came and had records left to
  write about (the bound is the writer's flush interval, 0.5 s). The observer counts only if
  an instance committed output it had time to read: otherwise it was idle, not losing.

The same for `eoschaos matrix` (matrix_trial): killed, cleaned up, then resumed with the same
`--out`; the resumed night must judge every cell run exactly once and leave nothing behind.
With `--backend containers` the leftovers include the run's containers and networks, and an
address of a network the run itself created counts as its own.

Used by tests/test_kill_trials.py (a few fixed moments in CI, random ones nightly) and by
scripts/kill_trials.py (many random trials, the figures in docs/benchmarks.md).
"""

from __future__ import annotations

import ipaddress
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

import copier_image
from commandline import run_eoschaos
from listening import (
    descendants,
    is_loopback,
    listening_addresses,
    listening_sockets,
    socket_owners,
    stat_fields,
)

from eoschaos.clusters.container_runtime import detect_runtime
from eoschaos.clusters.containers_backend import RUN_LABEL
from eoschaos.matrix.spec import load_matrix
from eoschaos.workloads.harness.supervisor import TWIN_INCARNATION

# A short kip447 eos run with a broker kill: cluster ~15 s, workload 20 s, then final scans,
# compaction and the check.
RUN_ARGS = ["--workload", "kip447", "--mode", "eos", "--faults", "kill", "--duration", "20"]
RUN_ARGS += ["--records", "2400", "--seed", "7"]
RUN_SECONDS = 75.0  # start to report, measured on the 2-core machine
SHORT = ["--duration", "20", "--records", "2400", "--seed", "7"]
BYO_KIP447 = [
    "--workload",
    "byo",
    "--command",
    f"{sys.executable} -m eoschaos.workloads.kip447.processor --env",
]
# Crashes from 3 s on: the first replacement starts a few seconds into the workload.
CRASH_RUN_ARGS = {
    "kip447": ["--workload", "kip447", "--faults", "crash", *SHORT],
    "streams": ["--workload", "streams", "--faults", "crash", *SHORT],
    "byo": [*BYO_KIP447, "--faults", "crash", *SHORT],
    # the user's image: its instances are containers, the runtime's client their process
    "byo-image": [*copier_image.RUN_ARGS, "--faults", "crash", *SHORT],
}
# Every workload, killed at a uniform moment over a whole run (start to report, seconds on
# the 2-core machine): a kip447 run with a broker kill, the others under crashes.
RANDOM_RUN_ARGS = {
    "kip447": (RUN_ARGS, RUN_SECONDS),
    "streams": (CRASH_RUN_ARGS["streams"], 100.0),
    "spark": (["--workload", "spark", "--faults", "crash", *SHORT], 150.0),
    "copier": (["--workload", "copier", "--faults", "crash", *SHORT], 80.0),
    "byo": (CRASH_RUN_ARGS["byo"], 80.0),
    # a JobManager and two TaskManagers start before the input does
    "flink": (["--workload", "flink", "--faults", "crash", *SHORT], 130.0),
}
# Phases of a run as its progress lines announce them, in order: (phase, the line's start).
PHASES = [
    ("cluster start", "[eoschaos] run dir:"),
    ("workload", "[eoschaos] workload "),
    # the history is whole from here: the batch headers (evidence only) are recorded next
    ("log batches", "[eoschaos] final scans and end state recorded"),
    ("compaction", "[eoschaos] compacting the history"),
    ("checking", "[eoschaos] checking the history"),
]
# Not a progress line: the moment the supervisor restarted a crashed instance, read from the
# PID file of an incarnation after the first (`processor-<instance>.<incarnation>.json`).
INSTANCE_RESTART = "instance restart"
ACTIVE_WITHIN_S = 1.0  # a writer with an event this close to the kill was writing when it came
# a commit this long before the kill had time to be read and flushed: the flush interval
# (0.5 s) and the observer's poll (0.2 s)
READ_S = 0.75
LEFTOVER_GRACE_S = 15.0  # orphans that watch their parent exit on their own within this
IN_PROCESS_WRITERS = ("seeder", "observer", "nemesis")
LISTEN_SAMPLE_S = 0.5  # how often the run's processes' listening sockets are read
SECOND_LOOK_S = 2.0  # between the two looks at the ports left listening after cleanup


@dataclass
class Kill:
    """A command started, watched and SIGKILLed: what a trial of any command shares."""

    moment: str  # the phase aimed at ("random": a uniform time over the run)
    delay_s: float  # after the phase's progress line (or after start, for "random")
    phase_hit: str = ""  # the phase the command was in when killed
    killed_after_s: float = 0.0
    finished_first: bool = False  # the command ended before the kill came
    killed_wall: float = 0.0
    leftover_processes: list[str] = field(default_factory=list)
    leftover_containers: list[str] = field(default_factory=list)
    leftover_ports: list[int] = field(default_factory=list)
    cleanup_exit: int | None = None
    listened_on: list[str] = field(default_factory=list)  # every address seen while it ran
    own_networks: list[str] = field(default_factory=list)  # networks the run itself created

    @property
    def ok(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        """What the kill left or showed: processes, containers, ports, listeners."""
        found = []
        if self.leftover_processes:
            found.append(f"processes left: {self.leftover_processes}")
        if self.leftover_containers:
            found.append(f"containers or networks left: {self.leftover_containers}")
        outside = [a for a in self.listened_on if not _own_address(a, self.own_networks)]
        if outside:
            found.append(f"listened beyond loopback: {outside}")
        if self.leftover_ports:
            found.append(f"ports still listening: {self.leftover_ports}")
        if self.cleanup_exit not in (None, 0, 2):  # 2: one line, e.g. nothing was started yet
            found.append(f"cleanup exited {self.cleanup_exit}")
        return found


@dataclass
class Trial(Kill):
    """One kill of `eoschaos run` and what it left."""

    run_dir: str = ""
    check_exit: int | None = None
    check_verdict: str | None = None
    check_complete: bool | None = None
    check_last_line: str = ""
    check_traceback: bool = False
    writer_loss_s: dict[str, float] = field(default_factory=dict)

    def problems(self) -> list[str]:
        found = super().problems()
        if self.check_traceback:
            found.append(f"the re-check printed a traceback: {self.check_last_line}")
        if self.check_exit == 2 and not self.check_last_line.startswith("eoschaos: error: "):
            found.append(f"exit 2 without one error line: {self.check_last_line}")
        if self.check_exit not in (None, 0, 1, 2, 3):  # None: not re-checked
            found.append(f"re-check exit {self.check_exit}: {self.check_last_line}")
        if self.check_verdict == "PASS" and not self.check_complete:
            found.append("an incomplete history read as PASS")
        if self.check_exit == 0 and self.phase_hit in ("cluster start", "workload"):
            found.append(f"a run killed during {self.phase_hit} re-checked as PASS")
        lost = {writer: s for writer, s in self.writer_loss_s.items() if s > 0.5 + 0.25}
        if lost:
            found.append(f"history lost beyond the 0.5 s flush interval: {lost}")
        return found


@dataclass
class MatrixTrial(Kill):
    """One kill of `eoschaos matrix`, its cleanup, and the same night resumed."""

    out: str = ""
    resume_exit: int | None = None
    resume_last_line: str = ""
    resume_traceback: bool = False
    judged: dict[str, int] = field(default_factory=dict)  # cell run key -> rows
    expected_keys: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # cell runs the resumed night judged ERROR
    unmet: list[str] = field(default_factory=list)  # cell runs that missed their expectation
    killed_attempts: int = 0  # cell run directories moved aside as `<name>.killed-N`
    left_after_resume: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        found = super().problems()
        if self.resume_traceback:
            found.append(f"the resumed matrix printed a traceback: {self.resume_last_line}")
        if self.resume_exit not in (0, 1):
            found.append(f"the resumed matrix exited {self.resume_exit}: {self.resume_last_line}")
        missing = sorted(set(self.expected_keys) - set(self.judged))
        if missing:
            found.append(f"cell runs never judged: {missing}")
        twice = sorted(key for key, rows in self.judged.items() if rows > 1)
        if twice:
            found.append(f"cell runs judged twice: {twice}")
        if self.errors:
            found.append(f"cell runs in ERROR after the resume: {self.errors}")
        if self.left_after_resume:
            found.append(f"left after the resumed matrix: {self.left_after_resume}")
        return found


def run_trial(
    run_dir: Path,
    moment: str,
    delay_s: float,
    run_args: list[str],
    env: dict[str, str] | None = None,
    deadline_s: float = 600.0,
    recheck: bool = True,
) -> Trial:
    """Start `eoschaos run RUN_ARGS --out RUN_DIR`, SIGKILL it `delay_s` after the progress
    line of phase `moment` (or after start, for moment "random"; or after a crashed instance's
    replacement started, for INSTANCE_RESTART), clean up, re-check (unless told not to)."""
    trial = Trial(moment, round(delay_s, 2), run_dir=str(run_dir))
    before = MachineBefore.now()
    command = ["run", *run_args, "--out", str(run_dir)]
    _start_and_kill(trial, command, _run_phase, run_dir, env, deadline_s)
    trial.writer_loss_s = _writer_loss(run_dir, trial.killed_wall, _records(run_args))
    _clean_up(trial, run_dir, before, env)
    if not recheck:
        return trial
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


def matrix_trial(
    out: Path,
    matrix_file: Path,
    delay_s: float,
    env: dict[str, str] | None = None,
    deadline_s: float = 1800.0,
) -> MatrixTrial:
    """Start `eoschaos matrix FILE --out OUT`, SIGKILL it `delay_s` after start, clean up
    (`eoschaos cleanup OUT`), then run the same command again: the resumed night."""
    trial = MatrixTrial("random", round(delay_s, 2), out=str(out))
    trial.expected_keys = [run.key for run in load_matrix(matrix_file)]
    before = MachineBefore.now()
    command = ["matrix", str(matrix_file), "--out", str(out)]
    _start_and_kill(trial, command, _matrix_phase, out, env, deadline_s)
    _clean_up(trial, out, before, env)
    resumed = subprocess.run(
        [sys.executable, "-m", "eoschaos.cli", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=deadline_s,
        check=False,
    )
    lines = resumed.stderr.strip().splitlines()
    trial.resume_exit = resumed.returncode
    trial.resume_last_line = lines[-1] if lines else ""
    trial.resume_traceback = "Traceback (most recent call last)" in resumed.stderr
    rows = _results(out)
    for row in rows:
        trial.judged[row["key"]] = trial.judged.get(row["key"], 0) + 1
    trial.errors = [row["key"] for row in rows if row.get("verdict") == "ERROR"]
    trial.unmet = [row["key"] for row in rows if not row.get("met_expectation")]
    trial.killed_attempts = len(list(out.glob("runs/*.killed-*")))
    trial.left_after_resume = _await_leftovers(out) + containers_of(out)
    return trial


def _start_and_kill(
    kill: Kill,
    command: list[str],
    phase_of,
    directory: Path,
    env: dict[str, str] | None,
    deadline_s: float,
) -> None:
    """Run `eoschaos COMMAND` (its output in `directory`), sampling what its processes listen
    on, and SIGKILL it at the kill's moment; fill in when, in which phase and what it listened
    on. An address off loopback may be the run's own network's: those are read when seen."""
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "eoschaos.cli", *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    seen: dict[str, float] = {}  # phase -> when its line came
    reader = threading.Thread(target=_follow, args=(child, phase_of, seen, started), daemon=True)
    reader.start()
    aim = None if kill.moment == "random" else kill.moment
    listened: set[str] = set()
    sampled = 0.0
    while child.poll() is None and time.monotonic() - started < deadline_s:
        if aim == INSTANCE_RESTART and aim not in seen and _restarted(directory):
            seen[aim] = time.monotonic() - started
        since = seen.get(aim, float("inf")) if aim is not None else 0.0
        if time.monotonic() - started >= since + kill.delay_s:
            break
        if time.monotonic() - sampled > LISTEN_SAMPLE_S:
            sampled = time.monotonic()
            for addresses in listening_addresses([child.pid, *descendants(child.pid)]).values():
                if any(not _own_address(a, kill.own_networks) for a in set(addresses) - listened):
                    kill.own_networks = sorted({*kill.own_networks, *_networks_of(directory)})
                listened.update(addresses)
        time.sleep(0.02)
    if child.poll() is None:
        child.send_signal(signal.SIGKILL)
        kill.killed_after_s = round(time.monotonic() - started, 2)
    else:
        kill.finished_first = True
    kill.killed_wall = time.time()
    child.wait()
    reader.join(timeout=5)
    kill.listened_on = sorted(listened)
    kill.phase_hit = max(seen, key=seen.get) if seen else "before any progress"


def _restarted(run_dir: Path) -> bool:
    """A replacement instance was started: a PID file of incarnation 1 or later (not a twin)."""
    for pid_file in (run_dir / "workload" / "pids").glob("*.json"):
        incarnation = pid_file.stem.rsplit(".", 1)[-1]
        if incarnation.isdigit() and 1 <= int(incarnation) < TWIN_INCARNATION:
            return True
    return False


def _clean_up(kill: Kill, directory: Path, before: MachineBefore, env) -> None:
    """`eoschaos cleanup DIR`, then what is left: processes, containers, new listening ports;
    and the networks the run made (read before cleanup removes them, if still there)."""
    kill.own_networks = sorted({*kill.own_networks, *_networks_of(directory)})
    cleanup = run_eoschaos("cleanup", str(directory), env=env)
    kill.cleanup_exit = cleanup.returncode
    kill.leftover_processes = _await_leftovers(directory)
    kill.leftover_containers = containers_of(directory)
    kill.leftover_ports = before.new_ports()


def random_trial(run_dir: Path, rng: random.Random, run_seconds: float, **kwargs) -> Trial:
    """A kill at a uniform moment over a whole run of `run_seconds` (start to report)."""
    return run_trial(run_dir, "random", rng.uniform(0, run_seconds), **kwargs)


def summary(trials: list[Trial] | list[MatrixTrial]) -> dict:
    hits: dict[str, int] = {}
    for trial in trials:
        hits[trial.phase_hit] = hits.get(trial.phase_hit, 0) + 1
    losses = [s for trial in trials for s in getattr(trial, "writer_loss_s", {}).values()]
    exits = {t.check_exit if isinstance(t, Trial) else t.resume_exit for t in trials}
    return {
        "trials": len(trials),
        "phases_hit": hits,
        "with_problems": sum(not trial.ok for trial in trials),
        "leftover_processes": sum(len(trial.leftover_processes) for trial in trials),
        "leftover_containers": sum(len(trial.leftover_containers) for trial in trials),
        "leftover_ports": sum(len(trial.leftover_ports) for trial in trials),
        "exits": sorted(code for code in exits if code is not None),
        "max_writer_loss_s": max(losses, default=0.0),
        "problems": {_where(trial): trial.problems() for trial in trials if not trial.ok},
        "runs": [asdict(trial) for trial in trials],
    }


def _where(trial: Trial | MatrixTrial) -> str:
    return trial.run_dir if isinstance(trial, Trial) else trial.out


def _follow(child: subprocess.Popen, phase_of, seen: dict[str, float], started: float) -> None:
    assert child.stderr is not None
    for line in child.stderr:
        phase = phase_of(line)
        if phase is not None and phase not in seen:
            seen[phase] = time.monotonic() - started


def _run_phase(line: str) -> str | None:
    """The phase of `eoschaos run` a progress line starts, if it starts one."""
    return next((phase for phase, start in PHASES if line.startswith(start)), None)


def _matrix_phase(line: str) -> str | None:
    """`eoschaos matrix`: a cell run's recording starts at "cell run KEY: X expected" and ends
    at its verdict line "cell run KEY: VERDICT"; before the first, the shared cluster starts."""
    if line.startswith("[eoschaos] matrix "):
        return "cluster start"
    if not line.startswith("[eoschaos] cell run "):
        return None
    key, _, rest = line.removeprefix("[eoschaos] cell run ").partition(": ")
    return f"recording {key}" if rest.rstrip().endswith("expected") else f"judged {key}"


def _results(out: Path) -> list[dict]:
    rows = []
    path = out / "results.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by the kill: the resumed night judges that run again
    return rows


# How to list (with the name's format field) and inspect each kind of object a run labels.
CONTAINERS = (("ps", "-a"), "{{.Names}}", ("inspect", "--type", "container"))
NETWORKS = (("network", "ls"), "{{.Name}}", ("network", "inspect"))


def containers_of(directory: Path) -> list[str]:
    """Containers and networks labelled with a run dir inside `directory` (none without a
    container runtime)."""
    return [name for kind in (CONTAINERS, NETWORKS) for name in _labelled_within(directory, kind)]


def _labelled_within(directory: Path, kind) -> dict[str, dict]:
    """Name -> inspected object, of the objects of `kind` labelled with a run dir inside
    `directory`: one listing, one inspection per labelled object."""
    runtime = detect_runtime()
    if runtime is None:
        return {}
    list_cmd, name_field, inspect_cmd = kind
    listed = runtime.run(*list_cmd, "--filter", f"label={RUN_LABEL}", "--format", name_field)
    found = {}
    for name in listed.stdout.split():
        shown = runtime.run(*inspect_cmd, name, check=False)
        for item in json.loads(shown.stdout or "[]") if shown.returncode == 0 else []:
            labels = (item.get("Config") or {}).get("Labels") or item.get("labels") or {}
            labelled = labels.get(RUN_LABEL) or (item.get("Labels") or {}).get(RUN_LABEL)
            if labelled and Path(labelled).resolve().is_relative_to(directory.resolve()):
                found[name] = item
    return found


def _networks_of(directory: Path) -> list[str]:
    """The subnets of the container networks the run created (labelled within `directory`)."""
    subnets = []
    for item in _labelled_within(directory, NETWORKS).values():
        podman = [entry["subnet"] for entry in item.get("subnets") or []]
        docker = [entry["Subnet"] for entry in (item.get("IPAM") or {}).get("Config") or []]
        subnets += podman + docker
    return subnets


def _own_address(address: str, own_networks: list[str]) -> bool:
    """Loopback, or an address of a network the run itself created."""
    if is_loopback(address):
        return True
    ip = ipaddress.ip_address(address.rsplit(":", 1)[0])
    return any(ip in ipaddress.ip_network(subnet) for subnet in own_networks)


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
        if writer == "observer" and not _output_committed(run_dir, last, killed_wall - READ_S):
            continue  # quiet because nothing new was committed for it to read
        if writer == "nemesis" and not _fault_due(run_dir, last, killed_wall - READ_S):
            continue  # quiet because no fault was due to start or heal
        loss[writer] = round(max(0.0, killed_wall - last), 3)
    return loss


def _fault_due(run_dir: Path, since: float, until: float) -> bool:
    """Whether the schedule's next fault was due to start between `since` and `until` (wall
    clock), its times anchored at the first fault the nemesis recorded; no fault recorded
    yet: due if the schedule is not empty. The nemesis records an invoke as each fault starts,
    so the invokes recorded say which start is next (anchored moments drift by the nemesis's
    jitter, tens of ms: a fault that started early must not read as still due). A fault's
    end is not awaited: a heal takes as long as the cluster takes."""
    schedule = json.loads((run_dir / "schedule.json").read_text())
    events = _events(run_dir / "history" / "nemesis.jsonl")
    starts = [e for e in events if e.get("kind") == "fault" and e.get("type") == "invoke"]
    if not starts:
        return bool(schedule)
    if len(starts) >= len(schedule):
        return False
    t0 = starts[0]["time"] - schedule[0]["at"]
    return since < t0 + schedule[len(starts)]["at"] <= until


def _events(path: Path) -> list[dict]:
    lines = path.read_text().splitlines() if path.exists() else []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # the line being written when the kill came
    return events


def _output_committed(run_dir: Path, since: float, until: float) -> bool:
    """Whether an instance committed a transaction between `since` and `until`, by the
    instances' own histories (other processes: the kill does not cut them short). The observer
    reads committed output only, so without a commit it has nothing to record: its quiet time
    is idleness, not loss."""
    for path in (run_dir / "history").glob("processor-*.jsonl"):
        for line in path.read_bytes().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a cut-short last line
            committed = event.get("f") == "commit" and event.get("type") == "ok"
            if committed and since < event.get("time", 0) < until:
                return True
    return False


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
            state = stat_fields(proc.name)[0]
        except OSError:
            continue
        if named and state != "Z":
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")[:80]
            found.append(f"{proc.name}:{command}")
    return found


@dataclass(frozen=True)
class MachineBefore:
    """What listened and ran before a trial. A port listening after cleanup that did not
    before is the run's leftover unless its process descends from a process tree that was
    already running then (a developer's test session beside the trial, the runner's own
    services): the run's processes, orphaned by the kill, hang from init through processes
    started during the trial (an orphan is re-parented to PID 1 here; no subreaper). A port
    whose process cannot be read counts as a leftover."""

    ports: frozenset[int]
    trees: frozenset[tuple[int, str]]  # (pid, start time) of every process then

    @classmethod
    def now(cls) -> MachineBefore:
        processes = (_identity(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit())
        return cls(frozenset(_listening_ports()), frozenset(p for p in processes if p))

    def new_ports(self) -> list[int]:
        """Ports listening now that no earlier process tree holds, seen on two looks a moment
        apart: a process of an earlier tree that is starting or exiting (a test session's
        short-lived Spark JVM) can hold a socket its process table entry no longer, or not
        yet, shows; an orphan's socket is there both times."""
        first = self._unowned_ports()
        if not first:
            return []
        time.sleep(SECOND_LOOK_S)
        return sorted(first & self._unowned_ports())

    def _unowned_ports(self) -> set[int]:
        sockets = [(a, inode) for a, inode in listening_sockets() if _port(a) not in self.ports]
        owners = socket_owners()  # after the sockets: one opened meanwhile has its owner
        return {
            _port(address)
            for address, inode in sockets
            if _top_of(owners.get(inode)) not in self.trees
        }


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time): a pid is reused, the pair is not."""
    try:
        return pid, stat_fields(pid)[19]
    except (OSError, IndexError):
        return None


def _top_of(pid: int | None) -> tuple[int, str] | None:
    """The identity of `pid`'s topmost ancestor below init (itself if init is its parent)."""
    while pid is not None:
        try:
            fields = stat_fields(pid)
            parent = int(fields[1])
        except (OSError, IndexError, ValueError):
            return None
        if parent <= 1:
            return pid, fields[19]
        pid = parent
    return None


def _listening_ports() -> set[int]:
    """Every TCP port listening on this machine (any process)."""
    return {_port(address) for address, _ in listening_sockets()}
