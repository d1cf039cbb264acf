"""A bring-your-own pipeline that is transactional but fences nothing: Kafka's own
TransactionalMessageCopier, two processes per input partition (manually assigned, so no
group generation fences either), each taking a fresh transactional.id every time it starts.

That is how a deployment goes wrong that gives each replica (or each restart) a new
transactional.id: the coordinator never sees the old producer again, so nothing stops two
copiers from consuming the same input range, committing their copies and their offsets in
transactions of their own. The test expects the brokers' logs to show it without any help from
the pipeline: the group's committed offset of a partition moves backwards.

Run with `--workload byo --instances 2*PARTITIONS --command "python tests/byo_fresh_ids.py"`.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from eoschaos.clusters.kafka_dist import resolve
from eoschaos.contract import instance_env
from eoschaos.contract.host import java_binary

COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"


def main() -> None:
    env = os.environ
    partition = int(env[instance_env.INSTANCE]) % int(env[instance_env.PARTITIONS])
    fresh_id = f"fresh-{env[instance_env.INSTANCE]}-{uuid.uuid4().hex[:8]}"
    dist = resolve()
    java = java_binary()
    os.execv(
        java,
        [
            java,
            "-Xmx192m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            *dist.logging_args(Path(env[instance_env.LOG_DIR]), tool=True),
            "-cp",
            dist.classpath,
            COPIER,
            "--broker-list",
            env[instance_env.BOOTSTRAP_SERVERS],
            "--input-topic",
            env[instance_env.INPUT_TOPIC],
            "--input-partition",
            str(partition),
            "--output-topic",
            env[instance_env.OUTPUT_TOPIC],
            "--consumer-group",
            env[instance_env.GROUP_ID],
            "--transactional-id",
            fresh_id,
            "--transaction-size",
            "100",
            "--transaction-timeout",
            "10000",
        ],
    )


if __name__ == "__main__":
    main()
