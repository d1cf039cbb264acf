"""One processor process of the KIP-447 pipeline.

    python -m eoschaos.workloads.kip447.processor CONFIG INSTANCE INCARNATION [TXN_ID]

Each instance runs as its own OS process so the harness can kill -9 or SIGSTOP it like a real
deployment's pod. It reads the shared ProcessorConfig (JSON) from CONFIG, writes history as
`processor-<instance>.<incarnation>`, and exits 0 after SIGTERM (it finishes the current
transaction and leaves the group), EXIT_FENCED when fenced, EXIT_UNDELIVERABLE in mode alos
when output failed for good.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path

from eoschaos.contract import instance_env
from eoschaos.contract.history import HistoryWriter, instance_name
from eoschaos.workloads.harness.orphan import exit_when_orphaned
from eoschaos.workloads.kip447.at_least_once import AtLeastOnceProcessor, Undeliverable
from eoschaos.workloads.kip447.config import (
    EXIT_FENCED,
    EXIT_UNDELIVERABLE,
    ProcessorConfig,
)
from eoschaos.workloads.kip447.transactional import Fenced, TransactionalProcessor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eoschaos.workloads.kip447.processor")
    parser.add_argument(
        "--env",
        action="store_true",
        help="take everything from the EOSCHAOS_* environment of docs/byo.md (no arguments)",
    )
    parser.add_argument("config", type=Path, nargs="?")
    parser.add_argument("instance", type=int, nargs="?")
    parser.add_argument("incarnation", type=int, nargs="?")
    parser.add_argument("txn_id", nargs="?", help="transactional.id (not in mode alos)")
    parser.add_argument(
        "--bootstrap", help="this instance's bootstrap servers (default: the config file's)"
    )
    args = parser.parse_args(argv)
    if args.env:
        config = ProcessorConfig.from_env(os.environ)
        args.instance = int(os.environ[instance_env.INSTANCE])
        args.incarnation = int(os.environ[instance_env.INCARNATION])
        args.txn_id = os.environ.get(instance_env.TRANSACTIONAL_ID) or None
    elif args.config is None or args.instance is None or args.incarnation is None:
        parser.error("give CONFIG INSTANCE INCARNATION [TXN_ID], or --env")
    else:
        config = ProcessorConfig.load(args.config)
        if args.bootstrap:
            config = replace(config, bootstrap=args.bootstrap)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    exit_when_orphaned()

    history = HistoryWriter(
        Path(config.run_dir), instance_name(args.instance, args.incarnation), flush_each=True
    )
    identity = {"instance": args.instance, "incarnation": args.incarnation, "txn_id": args.txn_id}
    try:
        if config.pipeline.mode == "alos":
            AtLeastOnceProcessor(config, history, args.instance, args.incarnation, stop).run()
        else:
            if not args.txn_id:
                parser.error(f"mode {config.pipeline.mode} needs a transactional.id")
            TransactionalProcessor(
                config, history, args.instance, args.incarnation, args.txn_id, stop
            ).run()
    except Fenced as exc:
        history.record("txn", "info", "fenced", error=exc.error, **identity)
        print(f"fenced: {exc.error}; exiting", file=sys.stderr)
        return EXIT_FENCED
    except Undeliverable as exc:
        print(f"output undeliverable: {exc.error}; exiting", file=sys.stderr)
        return EXIT_UNDELIVERABLE
    finally:
        history.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
