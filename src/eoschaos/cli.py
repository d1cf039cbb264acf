"""`eoschaos` command line. Exit codes: 0 success/PASS, 1 FAIL, 2 bad input or environment,
3 UNKNOWN (a run that did not reach its end: nothing failed in what was recorded)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

from eoschaos.chaos.catalogue import FAULTS
from eoschaos.clusters.kafka_dist import DEFAULT_KAFKA_VERSION
from eoschaos.contract.checks import results_of
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.rundir import HISTORY_DIR, REPORT_FILE, RUN_MANIFEST, read_manifest

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit code 2 like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise EoschaosError(f"{message} (see `{self.prog} --help`)")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eoschaos", description=__doc__)
    sub = parser.add_subparsers(dest="subcommand", required=True, parser_class=_Parser)

    install = sub.add_parser("install", help="fetch Kafka jars and build Toxiproxy into the cache")
    install.add_argument(
        "--kafka-version",
        action="append",
        dest="kafka_versions",
        help="a Kafka version to fetch (repeatable; default: the default version)",
    )

    cluster = sub.add_parser("cluster", help="start or stop a cluster by hand")
    cluster_sub = cluster.add_subparsers(
        dest="cluster_command", required=True, parser_class=_Parser
    )
    up = cluster_sub.add_parser("up", help="start a cluster, print its JSON, leave it running")
    _add_cluster_args(up)
    down = cluster_sub.add_parser("down", help="stop the cluster of RUN_DIR")
    down.add_argument("run_dir", type=Path)

    cleanup = sub.add_parser("cleanup", help="stop leftovers of crashed runs")
    cleanup.add_argument(
        "run_dir",
        type=Path,
        nargs="?",
        help="one run dir or matrix output (default: every run not stopped cleanly)",
    )

    demo = sub.add_parser("demo", help="cluster + transactions + a broker kill, narrated")
    _add_cluster_args(demo)

    run = sub.add_parser(
        "run",
        help="run a workload under faults; write history, verdict, report",
        # unset options are left out, so RunConfig.from_options holds every default
        argument_default=argparse.SUPPRESS,
    )
    run.add_argument(
        "--workload",
        help="kip447 (default), streams, spark, copier, flink, or byo (your own, with --command)",
    )
    run.add_argument(
        "--mode",
        help="eos (correct) or a known-bad mode of the workload: kip447 alos, no-fencing, "
        "read-uncommitted; streams/spark/flink alos; copier no-fencing (eos-group: correct, "
        "the copiers in one consumer group)",
    )
    run.add_argument(
        "--command",
        help="--workload byo: the shell command that starts one instance (docs/byo.md)",
    )
    run.add_argument(
        "--pipeline-image",
        help="--workload byo: run each instance as a container of this image (podman or "
        "Docker), --command its arguments (docs/byo.md)",
    )
    run.add_argument(
        "--id-from",
        help="where an output record names its source id: key (default), header:NAME, json:PATH",
    )
    run.add_argument(
        "--expect",
        help="--workload byo, an aggregating pipeline: MODULE:FUNCTION or FILE.py:FUNCTION "
        "mapping the committed input records to the expected final value per output key "
        "(docs/byo.md)",
    )
    run.add_argument(
        "--input",
        help="--workload byo, your own input records: MODULE:FUNCTION or FILE.py:FUNCTION, "
        "called as FUNCTION(id, seed) and returning a dict of key, value and headers "
        "(docs/byo.md)",
    )
    run.add_argument(
        "--input-topics",
        help="--workload byo: the topics your pipeline reads, comma-separated, each "
        "NAME[:PARTITIONS[:REPLICATION]] (default: one, named for the run; docs/byo.md)",
    )
    run.add_argument(
        "--output-topics",
        help="--workload byo: the topics your pipeline writes; each input id is judged "
        "delivered exactly once across them (default: one, named for the run)",
    )
    run.add_argument(
        "--dead-letter-topics",
        help="--workload byo: where your pipeline puts the records it rejects; an id there "
        "counts as delivered, once across these and the output topics",
    )
    run.add_argument(
        "--fan-out-topics",
        help="--workload byo: topics your pipeline writes every record to besides its output "
        "(an audit log, a copy); each must hold each input id exactly once, on its own",
    )
    run.add_argument(
        "--input-id-from",
        help="with --input, where an input record holds its id: key, header:NAME, json:PATH "
        "(default: as --id-from)",
    )
    run.add_argument(
        "--faults",
        help="comma-separated faults for a random schedule from --seed (docs/schedules.md): "
        f"{', '.join(FAULTS)} (default: none)",
    )
    run.add_argument(
        "--schedule",
        type=Path,
        help="explicit fault schedule, a JSON list of {at, fault, target, duration, params}",
    )
    run.add_argument(
        "--intensity",
        help="pause between random faults: low, normal (default) or high",
    )
    run.add_argument(
        "--no-recovery-wait",
        action="store_true",
        help="start the next broker fault without waiting for under-replication to clear",
    )
    run.add_argument(
        "--protocol-proxy",
        action="store_true",
        help="put the Kafka protocol proxy on the cluster's client links even when no fault "
        "needs it (faults on chosen requests bring it anyway)",
    )
    run.add_argument(
        "--non-idempotent-seeder",
        action="store_true",
        help="seed the input with a non-idempotent, retrying producer (known-bad input)",
    )
    run.add_argument("--duration", type=float, help="workload seconds (default 30)")
    run.add_argument(
        "--start-timeout",
        type=float,
        help="seconds the pipeline may take to show its first output (default 60; spark 180)",
    )
    run.add_argument("--seed", type=int, help="seed of the schedule and the workload")
    run.add_argument("--records", type=_positive_int, help="input records")
    run.add_argument(
        "--instances",
        type=_positive_int,
        help="pipeline instances (default: 3 for kip447/byo, 2 streams, 1 spark; copier: one "
        "per partition)",
    )
    run.add_argument("--partitions", type=_positive_int, help="input partitions")
    run.add_argument("--kafka-version", help=f"Kafka version (default {DEFAULT_KAFKA_VERSION})")
    run.add_argument(
        "--client-version",
        help="streams: the Kafka client version its app is built against (default: the "
        "cluster's; 3.9.2 on a 4.x cluster runs transaction protocol 1)",
    )
    run.add_argument(
        "--buckets",
        type=_positive_int,
        help="streams: the keys its aggregate keeps, id mod BUCKETS (default 10)",
    )
    run.add_argument(
        "--streams-config",
        help="streams: Kafka Streams settings over its app's own, KEY=VALUE,... (the app's "
        "eoschaos.rocksdb.write.buffer.bytes sizes its stores' memtables)",
    )
    run.add_argument("--out", type=Path, help="run dir to create (new or empty)")
    run.add_argument("--spark-master", help="Spark master (default local[*])")
    run.add_argument(
        "--backend",
        help="process (JVMs on loopback, default) or containers (podman/Docker)",
    )
    run.add_argument("--image", help="Kafka image for --backend containers")
    run.add_argument(
        "--max-lag",
        type=float,
        help="judge liveness.realtime-lag: seconds a committed record may take from its commit "
        "to the downstream reader (default: the lag is reported, not judged)",
    )

    matrix = sub.add_parser(
        "matrix", help="run a matrix file of cells; write results.jsonl, junit.xml, index.html"
    )
    matrix.add_argument("file", type=Path, help="the matrix (TOML; docs/nightly.md)")
    matrix.add_argument(
        "--out", type=Path, required=True, help="output dir; the same dir again resumes"
    )
    matrix.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="start no cell run after this many minutes; the rest are listed as not run",
    )
    matrix.add_argument(
        "--previous",
        type=Path,
        action="append",
        default=[],
        help="an earlier night's output dir, or a dir of them, for regressions (repeatable)",
    )
    matrix.add_argument("--spark-master", default=None, help="Spark master (default local[*])")

    hunt = sub.add_parser(
        "hunt",
        help="random schedules over the whole fault catalogue on the eos workloads for a set "
        "time; every FAIL kept with a shrunk, replayable schedule (docs/nightly.md)",
    )
    hunt.add_argument(
        "--out", type=Path, required=True, help="output dir; the same dir again resumes"
    )
    hunt.add_argument(
        "--hours",
        type=float,
        default=3.0,
        help="time budget (default 3); 0 draws nothing and rewrites hunt.json (after triage)",
    )
    hunt.add_argument(
        "--triage",
        type=Path,
        default=None,
        help="TOML of [[rule]]s that triage FAIL draws (docs/nightly.md); known ones built in",
    )
    hunt.add_argument(
        "--workloads",
        default=None,
        help="comma-separated workloads that take turns, each in its correct mode "
        "(default kip447,streams,copier,spark,flink)",
    )
    hunt.add_argument(
        "--faults", default=None, help="comma-separated faults to draw from (default: all)"
    )
    hunt.add_argument(
        "--kafka-version",
        default=DEFAULT_KAFKA_VERSION,
        help=f"Kafka of the shared cluster (default {DEFAULT_KAFKA_VERSION})",
    )
    hunt.add_argument("--duration", type=float, default=60.0, help="seconds per run (default 60)")
    hunt.add_argument("--spark-master", default=None, help="Spark master (default local[*])")

    images = sub.add_parser("images", help="container images for --backend containers")
    images_sub = images.add_subparsers(dest="images_command", required=True, parser_class=_Parser)
    build = images_sub.add_parser("build", help="build eoschaos/kafka:<version> without a registry")
    build.add_argument(
        "--kafka-version", default=None, help=f"Kafka version (default {DEFAULT_KAFKA_VERSION})"
    )

    check = sub.add_parser("check", help="re-check a run directory: verdict.json + report.html")
    check.add_argument("run_dir", type=Path)
    check.add_argument("--spark-master", default=None, help="Spark master (default local[*])")
    return parser


def _add_cluster_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=_positive_int, default=3)
    parser.add_argument(
        "--kafka-version",
        default=None,
        help=f"Kafka version to run (default {DEFAULT_KAFKA_VERSION}; 3.9.x also supported)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="where logs, data and PID files go (must be new or empty)",
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=None,
        help="first of a block of loopback ports (default: first free block)",
    )


def new_run_dir(requested: Path | None, prefix: str) -> Path:
    """A fresh run directory; refusing a non-empty one is what keeps old histories safe."""
    if requested is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        requested = Path("eoschaos-runs") / f"{prefix}-{stamp}"
    if requested.exists() and (not requested.is_dir() or any(requested.iterdir())):
        raise EoschaosError(f"run dir {requested} exists and is not empty; pass a new --out")
    return requested.resolve()


def _start_cluster(args: argparse.Namespace, prefix: str):
    from eoschaos.clusters import kafka_dist, toxiproxy
    from eoschaos.clusters.broker_config import ClusterSpec
    from eoschaos.clusters.process_backend import ProcessCluster

    dist = kafka_dist.resolve(args.kafka_version)
    binary = toxiproxy.server_binary()
    spec = ClusterSpec(brokers=args.brokers, kafka_version=dist.version, base_port=args.base_port)
    cluster = ProcessCluster(new_run_dir(args.run_dir, prefix), spec, dist, binary)
    cluster.start()
    return cluster


def cmd_install(args: argparse.Namespace) -> int:
    import tempfile

    from eoschaos.clusters import kafka_dist, kafka_proxy, toxiproxy
    from eoschaos.clusters.process_backend import build_class_archive
    from eoschaos.workloads.flink.build import build_flink_job
    from eoschaos.workloads.spark.connector import connector_jars
    from eoschaos.workloads.streams.build import build_streams_app

    binary = toxiproxy.server_binary()
    print(f"Toxiproxy {toxiproxy.TOXIPROXY_VERSION}: {binary}", flush=True)
    print(f"Kafka protocol proxy: {kafka_proxy.proxy_binary()}", flush=True)
    for version in args.kafka_versions or [None]:
        dist = kafka_dist.resolve(version)
        print(f"Kafka {dist.version}: {dist.libs}", flush=True)
        if not kafka_dist.class_archive(dist).exists():
            print(f"Kafka {dist.version}: recording the broker class archive (once)", flush=True)
            with tempfile.TemporaryDirectory(prefix="eoschaos-cds-") as work:
                build_class_archive(dist, binary, Path(work))
        app = build_streams_app(dist.version, _say)
        print(f"Kafka {dist.version}: Streams workload app in {app.home}", flush=True)
    jars = connector_jars(progress=_say)
    print(f"Spark Kafka connector: {len(jars)} jars in {jars[0].parent}", flush=True)
    job = build_flink_job(_say)
    print(f"Flink workload job and runtime in {job.home}", flush=True)
    return EXIT_OK


def _say(message: str) -> None:
    print(message, flush=True)


def cmd_cluster(args: argparse.Namespace) -> int:
    from eoschaos.clusters.process_backend import ProcessCluster
    from eoschaos.clusters.registry import is_run_dir, stop_run_dir

    if args.cluster_command == "up":
        cluster = _start_cluster(args, "cluster")
        assert cluster.info is not None
        print(json.dumps(asdict(cluster.info), indent=2))
        return EXIT_OK
    run_dir = args.run_dir
    if not is_run_dir(run_dir):
        raise EoschaosError(
            f"{run_dir} is not an eoschaos run directory; pass the run_dir printed by "
            "`eoschaos cluster up`"
        )
    ProcessCluster.attach(run_dir)  # validates cluster.json before anything is signalled
    stopped = stop_run_dir(run_dir)
    print(f"stopped {len(stopped)} processes; logs and data kept in {run_dir.resolve()}")
    return EXIT_OK


def cmd_cleanup(args: argparse.Namespace) -> int:
    from eoschaos.clusters.processes import stop_strays
    from eoschaos.clusters.registry import (
        is_run_dir,
        registered_run_dirs,
        registered_within,
        stop_run_dir,
    )
    from eoschaos.matrix.runner import RESULTS_FILE

    if args.run_dir is not None:
        if is_run_dir(args.run_dir):
            targets = [args.run_dir]
        elif (
            (args.run_dir / RESULTS_FILE).exists()
            or (args.run_dir / RUN_MANIFEST).exists()
            or registered_within(args.run_dir)
        ):
            # a matrix output, or an `eoschaos run` directory: the clusters started inside it
            # (a matrix killed before its first verdict has no results yet, only its cluster)
            targets = registered_within(args.run_dir)
        else:
            raise EoschaosError(
                f"{args.run_dir} is not an eoschaos run directory or matrix output; nothing to do"
            )
    else:
        targets = registered_run_dirs()
    from eoschaos.clusters.containers_backend import cleanup_containers

    total = 0
    removed = cleanup_containers(args.run_dir)
    if removed:
        total += len(removed)
        # containers and networks of the runtime, and the runs' own processes (any backend)
        print(f"removed or stopped: {', '.join(removed)}")
    for run_dir in targets:
        stopped = stop_run_dir(run_dir)
        total += len(stopped)
        if stopped:
            print(f"{run_dir}: stopped {', '.join(stopped)}")
    if args.run_dir is not None:  # what no registered dir inside it still names
        strays = stop_strays(args.run_dir)
        total += len(strays)
        for stray in strays:
            print(f"{args.run_dir}: stopped {stray.describe()}")
    print(f"cleanup done: {total} processes stopped in {len(targets)} run dirs")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from eoschaos.demo import run_demo

    cluster = _start_cluster(args, "demo")
    try:
        return run_demo(cluster)
    finally:
        cluster.stop()


def _finish(verdict: dict, run_dir: Path) -> int:

    failed = [name for name, check in results_of(verdict).items() if check.failed]
    summary = verdict["verdict"] + (f" ({', '.join(failed)})" if failed else "")
    if verdict.get("unfinished"):
        summary += "; the run did not reach its end: " + "; ".join(verdict["unfinished"])
    if verdict.get("damage"):
        summary += "; the history is INCOMPLETE: " + "; ".join(verdict["damage"])
    print(f"verdict: {summary}", file=sys.stderr)
    print(run_dir / REPORT_FILE)
    return {"PASS": EXIT_OK, "UNKNOWN": EXIT_UNKNOWN}.get(verdict["verdict"], EXIT_FAIL)


def cmd_run(args: argparse.Namespace) -> int:
    from eoschaos.config import OPTIONS, RunConfig
    from eoschaos.run import judge_run, record_run

    given = {name: value for name, value in vars(args).items() if name in OPTIONS}
    config = RunConfig.from_options(**given)
    run_dir = new_run_dir(getattr(args, "out", None), f"{config.workload}-{config.mode}")
    run_dir.mkdir(parents=True, exist_ok=True)
    progress_to_stderr(f"run dir: {run_dir}")
    try:
        record_run(config, run_dir)
    except EoschaosError as exc:
        if not any((run_dir / HISTORY_DIR).glob("*.jsonl")):
            raise  # it ended before the workload recorded anything
        raise EoschaosError(
            f"{exc} (the history so far is kept; `eoschaos check {run_dir}` judges it)"
        ) from exc
    return _finish(judge_run(run_dir, spark_master=getattr(args, "spark_master", None)), run_dir)


def cmd_matrix(args: argparse.Namespace) -> int:
    from eoschaos.matrix import run_matrix_file
    from eoschaos.matrix.runner import InfrastructureFailed

    try:
        met = run_matrix_file(
            args.file,
            args.out.resolve(),
            max_minutes=args.max_minutes,
            previous=args.previous,
            spark_master=args.spark_master,
        )
    except InfrastructureFailed as exc:
        kept = "judged cell runs are kept; rerun with the same --out"
        raise EoschaosError(f"{exc} ({kept})") from None
    return EXIT_OK if met else EXIT_FAIL


def cmd_hunt(args: argparse.Namespace) -> int:
    from eoschaos.matrix.hunt import DEFAULT_WORKLOADS, HUNT_FILE, HuntPlan, run_hunt
    from eoschaos.matrix.runner import InfrastructureFailed
    from eoschaos.matrix.triage import UNTRIAGED, load_rules

    named = args.workloads.split(",") if args.workloads else DEFAULT_WORKLOADS
    plan = HuntPlan(
        workloads=tuple(name.strip() for name in named if name.strip()),
        kafka_version=args.kafka_version,
        duration=args.duration,
        faults=tuple(f.strip() for f in args.faults.split(",")) if args.faults else FAULTS,
    )
    rules = load_rules(args.triage)  # its mistakes before anything starts
    try:
        summary = run_hunt(
            plan, args.out.resolve(), args.hours, rules=rules, spark_master=args.spark_master
        )
    except InfrastructureFailed as exc:
        raise EoschaosError(f"{exc} (judged runs are kept; rerun with the same --out)") from None
    print(args.out.resolve() / HUNT_FILE)
    return EXIT_FAIL if summary["triage"].get(UNTRIAGED) or summary["errors"] else EXIT_OK


def cmd_images(args: argparse.Namespace) -> int:
    from eoschaos.clusters import kafka_dist
    from eoschaos.clusters.images import build_image

    print(build_image(kafka_dist.resolve(args.kafka_version), progress_to_stderr))
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from eoschaos.run import judge_run

    run_dir = args.run_dir.resolve()
    if not (run_dir / RUN_MANIFEST).is_file():
        raise EoschaosError(
            f"{args.run_dir} is not an eoschaos run directory (no {RUN_MANIFEST}); "
            "pass a directory written by `eoschaos run`"
        )
    read_manifest(run_dir)  # a damaged run.json is refused before Spark starts
    return _finish(judge_run(run_dir, spark_master=args.spark_master), run_dir)


_received_signals: list[int] = []


def _interrupt(signum: int, frame: object) -> None:
    # Remember the signal before raising: a C extension interrupted mid-call may turn the
    # KeyboardInterrupt into an unrelated error (confluent-kafka's AdminClient constructor
    # reports a TypeError), and the signal must still decide the outcome.
    _received_signals.append(signum)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):  # both unwind: stop what started, then exit
        signal.signal(sig, _interrupt)
    try:
        args = build_parser().parse_args(argv)
        handler = {
            "install": cmd_install,
            "cluster": cmd_cluster,
            "cleanup": cmd_cleanup,
            "demo": cmd_demo,
            "run": cmd_run,
            "check": cmd_check,
            "matrix": cmd_matrix,
            "hunt": cmd_hunt,
            "images": cmd_images,
        }[args.subcommand]
        return handler(args)
    except BaseException as exc:
        if _received_signals:
            print("eoschaos: interrupted; everything started was stopped", file=sys.stderr)
            return 128 + _received_signals[0]
        if isinstance(exc, EoschaosError):
            print(f"eoschaos: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        raise


if __name__ == "__main__":
    sys.exit(main())
