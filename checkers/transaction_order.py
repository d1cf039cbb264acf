"""Order inside one committed transaction: Jepsen's int-* family.

The kip447 processor sends a copy of each record it read, in the order it read them, and each
copy names its place among its transaction's sends (`txn_index`). In one committed
transaction, taken in that order, the copies from one input partition must come from
increasing input offsets with no input record between consecutive ones, and the copies sent
to one output partition must land at increasing offsets. Offsets alone cannot say this: a
transaction's sends to several partitions have no common offset order, and an out-of-order
read looks like an out-of-order send.

Only whole transactions are judged: those with every one of their sends (`txn_size` places)
in the final committed scan. A transaction torn by a stale commit, that landed some of its
partitions' records and not the others, shows gaps that no read or send made; what tore it is
delivery.torn-transaction's and isolation.aborted-read's business.

Another transaction's committed record between two consecutive sends of one transaction to
a partition is Jepsen's int-send-skip: normal in Kafka, whose transactions do not isolate
their appends, so it is counted for information under its own name, not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.lineage.keys import TXN_KEY_FIELDS, txn_known
from eoschaos.contract.checks import (
    INT_NONMONOTONIC_POLL,
    INT_NONMONOTONIC_SEND,
    INT_POLL_SKIP,
    INT_SEND_SKIP,
)
from eoschaos.contract.history import FINAL_COMMITTED

if TYPE_CHECKING:
    from eoschaos.checkers.history_io import History

INT_SEND_SKIP_NOTE = (
    "Information only, not part of the verdict: another transaction's committed record lies "
    "between two consecutive sends of one transaction to a partition. Kafka's transactions "
    "do not isolate their appends, so concurrent transactions interleave so in a correct "
    "run (Jepsen finds the same)."
)


def transaction_order_findings(history: History) -> DataFrame:
    """Anomaly rows of the int-* checks (and int-send-skip's, for information), from the final
    committed scan: each record's place in its partition, its source's place in the input,
    then each transaction's records in send order per input and per output partition.

    Two copies with the same place in one transaction are one send appended twice
    (delivery.duplicate's business), not a read or send out of order."""
    # Both topics' places in one window: the join's two sides then share its exchange.
    in_partition = Window.partitionBy("topic", "partition").orderBy("offset")
    placed = (
        history.kind("read")
        .where((F.col("process") == FINAL_COMMITTED) & F.col("topic").isin(*history.topics.all))
        .withColumn("position", F.row_number().over(in_partition))
    )
    inputs = placed.where(F.col("topic").isin(*history.topics.inputs)).select(
        F.col("partition").alias("src_partition"),
        F.col("offset").alias("src_offset"),
        F.col("position").alias("src_position"),
    )
    # Judged after the join, in the shuffle by transaction that the order windows use.
    sent = _whole_transactions(
        placed.where(
            F.col("topic").isin(*history.topics.written)
            & txn_known()
            & F.col("txn_index").isNotNull()
        ).join(inputs, ["src_partition", "src_offset"], "left")
    )
    # One shuffle by transaction; each order is a sort inside it, and a row's predecessor
    # counts only in the same input (output) partition.
    as_read = Window.partitionBy(*TXN_KEY_FIELDS).orderBy("src_partition", "txn_index", "offset")
    as_sent = Window.partitionBy(*TXN_KEY_FIELDS).orderBy("partition", "txn_index", "offset")
    read_before = F.lag(F.struct("src_partition", "txn_index", "src_offset", "src_position"))
    sent_before = F.lag(F.struct("partition", "txn_index", "offset", "position"))
    ordered = (
        sent.select("*", read_before.over(as_read).alias("r"), sent_before.over(as_sent).alias("s"))
        .select(
            "*",
            F.when(F.col("r.src_partition") == F.col("src_partition"), F.col("r.txn_index")).alias(
                "read_after_index"
            ),
            F.col("r.src_offset").alias("read_after"),
            F.col("r.src_position").alias("read_after_position"),
            F.when(F.col("s.partition") == F.col("partition"), F.col("s.txn_index")).alias(
                "sent_after_index"
            ),
            F.col("s.offset").alias("sent_after"),
            F.col("s.position").alias("sent_after_position"),
        )
        .drop("r", "s")
    )
    later_read = F.col("read_after_index") < F.col("txn_index")
    later_send = F.col("sent_after_index") < F.col("txn_index")
    skipped_inputs = F.col("src_position") - F.col("read_after_position") - 1
    skipped_outputs = F.col("position") - F.col("sent_after_position") - 1
    transaction = {
        "txn_id": F.col("txn_id"),
        **{name: F.col(name) for name in TXN_KEY_FIELDS},
        "index": F.col("txn_index"),
        "id": F.col("id"),
        "partition": F.col("partition"),
        "offset": F.col("offset"),
    }
    read = {
        "src_partition": F.col("src_partition"),
        "src_offset": F.col("src_offset"),
        "read_after": F.struct(
            F.col("read_after_index").alias("index"), F.col("read_after").alias("src_offset")
        ),
    }
    sent_after = F.struct(
        F.col("sent_after_index").alias("index"), F.col("sent_after").alias("offset")
    )
    order = F.col("offset").cast("double")
    return explode_findings(
        ordered,
        finding(
            later_read & (F.col("src_offset") <= F.col("read_after")),
            INT_NONMONOTONIC_POLL.name,
            order,
            sub=F.when(F.col("src_offset") == F.col("read_after"), "repeat").otherwise("backwards"),
            **transaction,
            **read,
        ),
        finding(
            later_read & (F.col("src_offset") > F.col("read_after")) & (skipped_inputs > 0),
            INT_POLL_SKIP.name,
            order,
            **transaction,
            **read,
            skipped=skipped_inputs,
        ),
        finding(
            later_send & (F.col("offset") < F.col("sent_after")),
            INT_NONMONOTONIC_SEND.name,
            order,
            **transaction,
            sent_after=sent_after,
        ),
        finding(
            later_send & (F.col("offset") > F.col("sent_after")) & (skipped_outputs > 0),
            INT_SEND_SKIP,
            order,
            **transaction,
            sent_after=sent_after,
            skipped=skipped_outputs,
        ),
    )


def _whole_transactions(sent: DataFrame) -> DataFrame:
    """The rows of transactions whose distinct places number their `txn_size`. The count is
    a dense rank by place, so a send appended twice counts once, and a transaction's rows
    stay in the shuffle by transaction that the order windows use."""
    by_txn = Window.partitionBy(*TXN_KEY_FIELDS)
    places = sent.withColumn("places", F.dense_rank().over(by_txn.orderBy("txn_index")))
    whole = F.max("places").over(by_txn) == F.max("txn_size").over(by_txn)
    return places.withColumn("whole", whole).where("whole").drop("places", "whole")
