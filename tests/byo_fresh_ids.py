"""A bring-your-own pipeline that is transactional but fences nothing: Kafka's own
TransactionalMessageCopier, two processes per input partition (manually assigned, so no
group generation fences either), each taking a fresh transactional.id every time it starts.

That is how a deployment goes wrong that gives each replica (or each restart) a new
transactional.id: the coordinator never sees the old producer again, so nothing stops two
copiers from consuming the same input range, committing their copies and their offsets in
transactions of their own. The test expects the brokers' logs to show it without any help from
the pipeline: the group's committed offset of a partition moves backwards.

The copier is started as `--workload copier` starts it (workloads/copier.py), with the fresh id
in place of the harness's and no random aborts. Run with `--workload byo --instances
2*PARTITIONS --command "python tests/byo_fresh_ids.py"`.

`--transaction-timeout-ms MS` gives the copier a transaction timeout of its own. Longer than
the run (brokers allow up to 15 minutes), it makes a copier killed mid-transaction leave that
transaction open past the run's end: no later producer takes its id to abort it, and its
coordinator aborts it only when the timeout expires. Its output holds every read_committed
reader of those partitions back: a hanging transaction, as the brokers' logs show it.
"""

from __future__ import annotations

import argparse
import os
import uuid

from eoschaos.clusters.kafka_dist import resolve
from eoschaos.contract import instance_env
from eoschaos.workloads.copier import CopierPipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transaction-timeout-ms", type=int, help="the copier's own")
    args = parser.parse_args()
    env = dict(os.environ)
    instance = int(env[instance_env.INSTANCE])
    env[instance_env.TRANSACTIONAL_ID] = f"fresh-{instance}-{uuid.uuid4().hex[:8]}"
    copier = CopierPipeline(resolve(), "eos", int(env[instance_env.PARTITIONS]), txn_prefix="")
    launch = copier.launch(instance, int(env[instance_env.INCARNATION]), env)
    # Without the copier's random aborts every copy commits, so both copiers' commits of one
    # input range land in every run, not only where neither happened to abort.
    argv = [arg for arg in launch.argv if arg != "--enable-random-aborts"]
    if args.transaction_timeout_ms is not None:
        argv[argv.index("--transaction-timeout") + 1] = str(args.transaction_timeout_ms)
    os.execve(argv[0], argv, launch.env)


if __name__ == "__main__":
    main()
