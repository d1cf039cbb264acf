"""`eoschaos hunt --hours H --out DIR`: a night of random schedules over the whole fault catalogue
on the exactly-once workloads, every FAIL kept with a shrunk schedule that replays it.

A draw is one `eoschaos run` of a workload in its correct mode under the random schedule its seed
gives over every fault of the catalogue (docs/schedules.md), expected to PASS. The workloads take
turns, a seed each (so that no two draws share a schedule), on one shared cluster and one warm
Spark session, as a matrix's cell runs do (eoschaos.matrix.runner), until the hours are spent. A
draw that FAILs is shrunk: each of its resolved schedule's events is left out in turn, last first,
and stays out if the run without it still fails one of the draw's failed checks; a race that does
not come back keeps its event. What is left is written as DIR/minimal/<draw>.json with the command
that replays it. results.jsonl holds every draw and shrink run, so a killed hunt resumes with the
same --out at the next seed; hunt.json counts the draws and lists the FAILs (workload, failed
checks, the faults left, the triage: eoschaos.matrix.triage) and the draws that could not be
judged. `--hours 0` draws nothing and rewrites hunt.json, as a reviewer does after writing the
night's triage.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eoschaos.chaos.catalogue import CATALOGUE, FAULTS
from eoschaos.chaos.schedule import FaultEvent, load_schedule, write_schedule
from eoschaos.clusters.kafka_dist import DEFAULT_KAFKA_VERSION
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.history import FAULT_TOOK_EFFECT
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.rundir import SCHEDULE_FILE, VERDICT_FILE
from eoschaos.matrix.runner import SharedCluster, append_row, read_results, run_cell
from eoschaos.matrix.spec import CellRun, Expectation
from eoschaos.matrix.triage import KNOWN, UNTRIAGED, TriageRule, triage_of
from eoschaos.run import WarmJudge
from eoschaos.workloads.registry import kind_of

HUNT_FILE = "hunt.json"
MINIMAL_DIR = "minimal"
DEFAULT_WORKLOADS = ("kip447", "streams", "copier", "spark", "flink")
DRAW = "hunt"  # a draw's cell name is hunt-<workload>; its shrink runs add -shrink-<n>


@dataclass(frozen=True)
class HuntPlan:
    """What a hunt draws: which workloads, on which Kafka, how long each run, which faults."""

    workloads: tuple[str, ...] = DEFAULT_WORKLOADS
    kafka_version: str = DEFAULT_KAFKA_VERSION
    duration: float = 60.0
    faults: tuple[str, ...] = FAULTS

    def draw(self, workload: str, seed: int) -> CellRun:
        """The run of `workload` in its correct mode under `seed`'s random schedule, over the
        faults it takes (a workload whose instances share one client address takes none of
        those on an instance's own lane)."""
        kind = kind_of(workload)
        faults = [f for f in self.faults if kind.instance_lanes or not CATALOGUE[f].needs_lane]
        options = {"workload": workload, "mode": kind.modes[0]}
        options |= {"faults": ",".join(faults), "duration": self.duration}
        return CellRun(f"{DRAW}-{workload}", self.kafka_version, seed, options, Expectation("PASS"))

    def workload_of(self, seed: int) -> str:
        """The workloads take turns, a seed each: every draw has a schedule of its own."""
        return self.workloads[(seed - 1) % len(self.workloads)]

    def check(self) -> None:
        """Bad input before anything starts: every draw's options go through RunConfig."""
        if not self.workloads:
            raise EoschaosError("a hunt needs at least one workload")
        for workload in self.workloads:
            self.draw(workload, 1).config("check")


def shrink(
    events: list[FaultEvent],
    still_fails: Callable[[list[FaultEvent]], bool],
    keep_going: Callable[[], bool],
) -> list[FaultEvent]:
    """The schedule with every event left out, last first, whose absence still fails; one try
    per event (each is a run), none once `keep_going` says the time is spent."""
    kept = list(events)
    for index in reversed(range(len(kept))):
        if len(kept) == 1 or not keep_going():
            break
        candidate = kept[:index] + kept[index + 1 :]
        if still_fails(candidate):
            kept = candidate
    return kept


def next_seed(rows: list[dict[str, Any]]) -> int:
    """The first seed no draw of an earlier invocation into the same DIR took."""
    drawn = [row["seed"] for row in rows if "shrinking" not in row]
    return max(drawn, default=0) + 1


def run_hunt(
    plan: HuntPlan,
    out: Path,
    hours: float,
    *,
    rules: tuple[TriageRule, ...] = KNOWN,
    spark_master: str | None = None,
    progress: Callable[[str], None] = progress_to_stderr,
) -> dict[str, Any]:
    """Draw until `hours` are spent (a run under way is finished); hunt.json's summary. A FAIL
    draw a rule triages is not shrunk. `hours` 0: no draw, hunt.json rewritten."""
    if hours < 0:
        raise EoschaosError(f"--hours must be 0 (rewrite hunt.json) or more, got {hours:g}")
    plan.check()
    if hours == 0:
        if not read_results(out):
            raise EoschaosError(
                f"--hours 0 rewrites hunt.json from the draws in {out}, and it has none; "
                "pass the --out of a hunt"
            )
        return _write_summary(out, rules, progress)
    out.mkdir(parents=True, exist_ok=True)
    rows = read_results(out)
    seed = next_seed(rows)
    deadline = time.monotonic() + hours * 3600

    def keep_going() -> bool:
        return time.monotonic() < deadline

    judge = WarmJudge(spark_master, progress)
    probes = [plan.draw(workload, seed) for workload in plan.workloads]
    try:
        with SharedCluster(out, plan.kafka_version, probes, progress) as shared:

            def judged(run: CellRun, **extra: Any) -> dict[str, Any]:
                row = {**run_cell(run, len(rows) + 1, out, shared, judge, progress), **extra}
                append_row(out, row)
                rows.append(row)
                return row

            while keep_going():
                workload = plan.workload_of(seed)
                row = judged(plan.draw(workload, seed))
                if row["verdict"] == "FAIL":
                    rule = _triage(rules, row, load_schedule(out / row["run_dir"] / SCHEDULE_FILE))
                    if rule is None:
                        _shrink_draw(plan, out, workload, seed, row, judged, keep_going, progress)
                    else:
                        progress(
                            f"hunt: {row['key']} FAILed: {rule.triage}, not shrunk: {rule.why}"
                        )
                seed += 1
    finally:
        judge.stop()
    return _write_summary(out, rules, progress)


def _write_summary(
    out: Path, rules: tuple[TriageRule, ...], progress: Callable[[str], None]
) -> dict[str, Any]:
    summary = hunt_summary(read_results(out), out, rules)
    (out / HUNT_FILE).write_text(json.dumps(summary, indent=1) + "\n")
    classes = ", ".join(f"{count} {name}" for name, count in summary["triage"].items())
    progress(
        f"hunt: {summary['draws']} draws, {len(summary['failures'])} FAIL ({classes or 'none'}), "
        f"{len(summary['errors'])} ERROR; {out / HUNT_FILE}"
    )
    return summary


def _triage(
    rules: tuple[TriageRule, ...], row: dict[str, Any], events: list[FaultEvent]
) -> TriageRule | None:
    faults = {event.fault for event in events}
    return triage_of(rules, row["key"], row["workload"], faults, set(row["failed"]))


def _shrink_draw(
    plan: HuntPlan,
    out: Path,
    workload: str,
    seed: int,
    row: dict[str, Any],
    judged: Callable[..., dict[str, Any]],
    keep_going: Callable[[], bool],
    progress: Callable[[str], None],
) -> None:
    """Shrink a FAIL draw's schedule; the minimal one goes to DIR/minimal/<draw>.json."""
    failed = set(row["failed"])
    draw = plan.draw(workload, seed)
    events = load_schedule(out / row["run_dir"] / SCHEDULE_FILE)
    minimal_dir = out / MINIMAL_DIR
    minimal_dir.mkdir(exist_ok=True)
    tries = 0

    def still_fails(candidate: list[FaultEvent]) -> bool:
        nonlocal tries
        tries += 1
        path = write_schedule(minimal_dir / f"{draw.dir_name}-try{tries}.json", candidate)
        options = {k: v for k, v in draw.options.items() if k != "faults"}
        options["schedule"] = path
        attempt = CellRun(
            f"{draw.cell}-shrink-{tries}", draw.kafka_version, seed, options, draw.expect
        )
        shrunk = judged(attempt, shrinking=draw.key, events=len(candidate))
        return bool(failed & set(shrunk.get("failed", {})))

    progress(
        f"hunt: {draw.key} FAILed ({', '.join(sorted(failed))}); shrinking {len(events)} events"
    )
    kept = shrink(events, still_fails, keep_going)
    minimal = write_schedule(minimal_dir / f"{draw.dir_name}.json", kept)
    progress(f"hunt: {draw.key} shrunk to {len(kept)} of {len(events)} events: {minimal}")


def hunt_summary(
    rows: list[dict[str, Any]], out: Path, rules: tuple[TriageRule, ...] = KNOWN
) -> dict[str, Any]:
    """hunt.json: the draws per workload, every FAIL draw with its minimal schedule (if its
    shrink finished), the command that replays it and its triage, the FAILs per triage class,
    and every draw that could not be judged (ERROR: the harness's, not the pipeline's)."""
    draws = [row for row in rows if "shrinking" not in row]
    per_workload = Counter(row["workload"] for row in draws)
    errors = [
        {"draw": row["key"], "reason": row.get("reason", "")}
        for row in draws
        if row.get("verdict") == "ERROR"
    ]
    failures = _failures(draws, out, rules)
    # the runs' own time, draws and shrink tries: a night resumed in sittings adds up
    seconds = sum(sum(row.get("seconds", {}).values()) for row in rows)
    return {
        "hours": round(seconds / 3600, 2),
        "draws": len(draws),
        "per_workload": dict(per_workload),
        "triage": dict(Counter(failure["triage"] for failure in failures)),
        "faults": _fault_effects(draws, out),
        "failures": failures,
        "errors": errors,
    }


def _fault_effects(draws: list[dict[str, Any]], out: Path) -> dict[str, dict[str, int]]:
    """Per fault, how many of the judged draws' schedules held it and how many of those took
    effect (a hunt whose faults never hit proves nothing), from each draw's verdict."""
    drawn: Counter[str] = Counter()
    effective: Counter[str] = Counter()
    verdicts = [out / row["run_dir"] / VERDICT_FILE for row in draws if "run_dir" in row]
    for verdict in filter(Path.is_file, verdicts):
        for fault in json.loads(verdict.read_text())["timeline"]["faults"]:
            params = json.loads(fault.get("params") or "{}")
            drawn[fault["f"]] += 1
            effective[fault["f"]] += params.get(FAULT_TOOK_EFFECT, True) is not False
    return {name: {"drawn": drawn[name], "took_effect": effective[name]} for name in sorted(drawn)}


def _failures(
    draws: list[dict[str, Any]], out: Path, rules: tuple[TriageRule, ...]
) -> list[dict[str, Any]]:
    failures = []
    for row in draws:
        if row.get("verdict") != "FAIL":
            continue
        workload, mode = row["workload"], row["mode"]
        minimal = out / MINIMAL_DIR / f"{Path(row['run_dir']).name}.json"
        schedule = minimal if minimal.exists() else out / row["run_dir"] / SCHEDULE_FILE
        events = load_schedule(schedule)
        rule = _triage(rules, row, events)
        failures.append(
            {
                "draw": row["key"],
                "workload": workload,
                "failed": sorted(row["failed"]),
                "faults_left": sorted({event.fault for event in events}),
                "shrunk": minimal.exists(),
                "schedule": str(schedule),
                "replay": f"eoschaos run --workload {workload} --mode {mode} "
                f"--kafka-version {row['kafka_version']} --seed {row['seed']} "
                f"--schedule {schedule}",
                "report": row.get("report"),
                "triage": rule.triage if rule else UNTRIAGED,
                "why": rule.why if rule else "",
            }
        )
    return failures
