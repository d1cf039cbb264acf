"""The order of each producer's sends: Jepsen's nonmonotonic-send.

A producer's acknowledged sends to one partition, in the order it made them (its send calls'
times), must land at increasing offsets. A producer that retries without idempotence while
later requests are in flight can land a retried record behind a later one: the input's order
is then not the order it was sent in, and every reader downstream sees that order.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from eoschaos.checkers.history_io import History
from eoschaos.contract.checks import NONMONOTONIC_SEND

# One grouping and one window over the sends: per producer and id, its first send call and
# every ack; then each ack against the producer's previous one in the same partition, in the
# order of their send calls. The rows are `findings.explode_findings`' (check, sub, weight,
# order, example), written out here.
FINDINGS = """
WITH per_id AS (
  SELECT process, id,
    min(CASE WHEN type = 'invoke' THEN time END) AS called,
    collect_list(CASE WHEN type = 'ok' AND offset IS NOT NULL
      THEN struct(topic, partition, offset) END) AS acks
  FROM {sends} WHERE topic IS NOT NULL GROUP BY process, id),
acks AS (
  SELECT process, id, called, ack.topic, ack.partition, ack.offset
  FROM per_id LATERAL VIEW explode(acks) AS ack WHERE called IS NOT NULL),
ordered AS (
  SELECT *, lag(id) OVER as_sent AS before_id, lag(offset) OVER as_sent AS before_offset
  FROM acks WINDOW as_sent AS (PARTITION BY process, topic, partition ORDER BY called, id))
SELECT :check AS check, '' AS sub, CAST(1 AS BIGINT) AS weight, CAST(id AS DOUBLE) AS order,
  to_json(named_struct('id', id, 'producer', process, 'partition', partition, 'offset', offset,
    'sent_after', named_struct('id', before_id, 'offset', before_offset))) AS example
FROM ordered WHERE offset < before_offset
"""


def send_order_findings(history: History) -> DataFrame:
    """Anomaly rows of isolation.nonmonotonic-send: an acknowledged send at a lower offset
    than the same producer's previous acknowledged send to that partition (an id sent twice
    counts from its first send call).

    Written as SQL text: the plan is a few py4j calls and one analysis, where building it step
    by step with the DataFrame API made a call per column and analysed the growing plan at
    every step (docs/benchmarks.md has both costs); the rows and their order are the same."""
    spark = history.events.sparkSession
    return spark.sql(FINDINGS, {"check": NONMONOTONIC_SEND.name}, sends=history.kind("send"))
