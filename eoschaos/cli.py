"""`eoschaos` command line. Exit codes: 0 success/PASS, 1 FAIL, 2 bad input or environment."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

from eoschaos.errors import EoschaosError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


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
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

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
        "run_dir", type=Path, nargs="?", help="one run dir (default: every run not stopped cleanly)"
    )

    demo = sub.add_parser("demo", help="cluster + transactions + a broker kill, narrated")
    _add_cluster_args(demo)
    return parser


def _add_cluster_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=_positive_int, default=3)
    parser.add_argument(
        "--kafka-version",
        default=None,
        help="Kafka version to run (default 4.3.1; 3.9.x also supported)",
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
        raise EoschaosError(f"run dir {requested} exists and is not empty; pass a new --run-dir")
    return requested.resolve()


def _start_cluster(args: argparse.Namespace, prefix: str):
    from clusters import kafka_dist, toxiproxy
    from clusters.broker_config import ClusterSpec
    from clusters.process_backend import ProcessCluster

    dist = kafka_dist.resolve(args.kafka_version)
    binary = toxiproxy.server_binary()
    spec = ClusterSpec(brokers=args.brokers, kafka_version=dist.version, base_port=args.base_port)
    cluster = ProcessCluster(new_run_dir(args.run_dir, prefix), spec, dist, binary)
    cluster.start()
    return cluster


def cmd_install(args: argparse.Namespace) -> int:
    import tempfile

    from clusters import kafka_dist, toxiproxy
    from clusters.process_backend import build_class_archive

    binary = toxiproxy.server_binary()
    print(f"Toxiproxy {toxiproxy.TOXIPROXY_VERSION}: {binary}", flush=True)
    for version in args.kafka_versions or [None]:
        dist = kafka_dist.resolve(version)
        print(f"Kafka {dist.version}: {dist.libs}", flush=True)
        if not kafka_dist.class_archive(dist).exists():
            print(f"Kafka {dist.version}: recording the broker class archive (once)", flush=True)
            with tempfile.TemporaryDirectory(prefix="eoschaos-cds-") as work:
                build_class_archive(dist, binary, Path(work))
    return EXIT_OK


def cmd_cluster(args: argparse.Namespace) -> int:
    from clusters.process_backend import ProcessCluster, is_run_dir, stop_run_dir

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
    from clusters.process_backend import is_run_dir, registered_run_dirs, stop_run_dir

    if args.run_dir is not None:
        if not is_run_dir(args.run_dir):
            raise EoschaosError(f"{args.run_dir} is not an eoschaos run directory; nothing to do")
        targets = [args.run_dir]
    else:
        targets = registered_run_dirs()
    total = 0
    for run_dir in targets:
        stopped = stop_run_dir(run_dir)
        total += len(stopped)
        if stopped:
            print(f"{run_dir}: stopped {', '.join(stopped)}")
    print(f"cleanup done: {total} processes stopped in {len(targets)} run dirs")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from eoschaos.demo import run_demo

    cluster = _start_cluster(args, "demo")
    try:
        return run_demo(cluster)
    finally:
        cluster.stop()


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
        }[args.command]
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
