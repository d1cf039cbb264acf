"""Benchmark: how much of a warm verdict Spark's stages take, and how much the driver.

    .venv/bin/python scripts/bench_verdict_driver.py RUN_DIR [--rounds 3]

A verdict's jobs are a proxy for its cost; this says where the seconds are. The verdict's parts
run one after another (as in bench_verdict_parts.py) in one warm Spark session, and each
measured verdict is split three ways:
- stages: the time some stage of the verdict was running (the union of their spans, from
  Spark's status store), with the tasks' run, CPU and deserialisation time;
- actions: the py4j calls that run a plan (collect, count, ...), less their stages, is the
  driver's planning, re-planning and scheduling of those plans;
- plan building: the rest, outside the actions: the other py4j calls (a DataFrame or Column
  built, each analysed by the JVM) and the Python between them.
The reference, measured in the same run: the floor of one action, a tiny aggregation with a
shuffle (spark.range), built, planned and collected, so `actions x floor` says what the number
of actions alone costs.
Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench_verdict_parts import WARM_UPS, one_after_another
from py4j import clientserver
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eoschaos.checkers import verdict
from eoschaos.checkers.spark import java_options_for, spark_session

FLOOR_ROUNDS = 20
# py4j methods that run a plan: their calls last as long as its jobs
ACTIONS = ("collectToPython", "count", "isEmpty", "toPythonIterator", "tail")


class Calls:
    """py4j round trips since `reset`: actions apart, by method name (the command's 3rd line)."""

    def __init__(self) -> None:
        self.reset()
        send = clientserver.ClientServerConnection.send_command

        def timed(connection, command: str) -> str:
            started = time.monotonic()
            try:
                return send(connection, command)
            finally:
                lines = command.split("\n")
                # a Dataset's method, not a static one of the same name (functions.count)
                action = len(lines) > 2 and lines[2] in ACTIONS and not lines[1].startswith("z:")
                self.seconds[action] += time.monotonic() - started
                self.count[action] += 1

        clientserver.ClientServerConnection.send_command = timed

    def reset(self) -> None:
        self.seconds = {True: 0.0, False: 0.0}
        self.count = {True: 0, False: 0}


def stage_figures(spark: SparkSession, seen: set[int]) -> dict[str, float]:
    """The stages not in `seen` (which this adds them to) that ran: how many, their tasks, the
    union of their spans and their tasks' run, CPU and deserialisation seconds."""
    store = spark.sparkContext._jsc.sc().statusStore()
    no_quantiles = spark.sparkContext._gateway.new_array(spark._jvm.double, 0)
    listed = store.stageList(None, False, False, no_quantiles, None).iterator()
    stages = []
    while listed.hasNext():
        stage = listed.next()
        if stage.stageId() not in seen:
            seen.add(stage.stageId())
            stages.append(stage)
    ran = [
        stage
        for stage in stages
        if stage.submissionTime().isDefined() and stage.completionTime().isDefined()
    ]  # a stage whose shuffle output an earlier job left is skipped: listed, never run
    spans = sorted(
        (stage.submissionTime().get().getTime(), stage.completionTime().get().getTime())
        for stage in ran
    )
    busy_ms, end = 0, 0
    for start, stop in spans:
        if stop > end:
            busy_ms += stop - max(start, end)
            end = stop
    return {
        "stages": len(spans),
        "tasks": sum(stage.numCompleteTasks() for stage in ran),
        "stage_s": busy_ms / 1000,
        "task_run_s": sum(stage.executorRunTime() for stage in stages) / 1000,
        "task_cpu_s": sum(stage.executorCpuTime() for stage in stages) / 1e9,
        "deserialise_s": sum(stage.executorDeserializeTime() for stage in stages) / 1000,
    }


def action_floor(spark: SparkSession) -> float:
    """The median seconds of a tiny aggregation with one shuffle, built and collected."""
    seconds = []
    for _ in range(FLOOR_ROUNDS):
        started = time.monotonic()
        spark.range(10).groupBy((F.col("id") % 2).alias("k")).count().collect()
        seconds.append(time.monotonic() - started)
    return statistics.median(seconds[FLOOR_ROUNDS // 2 :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    verdict.concurrently = one_after_another
    spark = spark_session(app="bench-verdict-driver", java_options=java_options_for(args.run_dir))
    for _ in range(WARM_UPS):
        verdict.check_run(spark, args.run_dir)
    floor = action_floor(spark)
    seen: set[int] = set()
    stage_figures(spark, seen)
    calls = Calls()
    print(f"{args.run_dir}: one action's floor {floor * 1000:.0f} ms")
    for _ in range(args.rounds):
        calls.reset()
        started = time.monotonic()
        judged = verdict.check_run(spark, args.run_dir)
        wall = time.monotonic() - started
        stages = stage_figures(spark, seen)
        actions, others = calls.count[True], calls.count[False]
        planning = calls.seconds[True] - stages["stage_s"]
        print(
            f"  {wall:.2f} s, {judged['checker']['jobs']} jobs: stages {stages['stage_s']:.2f} s "
            f"({stages['stages']} stages, {stages['tasks']} tasks; tasks run "
            f"{stages['task_run_s']:.2f} s, CPU {stages['task_cpu_s']:.2f} s, deserialise "
            f"{stages['deserialise_s']:.2f} s) | {actions} actions {calls.seconds[True]:.2f} s, "
            f"of it planning and scheduling {planning:.2f} s (actions x floor "
            f"{actions * floor:.2f} s) | plan building {wall - calls.seconds[True]:.2f} s "
            f"({others} other py4j calls)"
        )
    spark.stop()


if __name__ == "__main__":
    main()
