"""The transactional processor loop: Kafka's ExactlyOnceMessageProcessor, in Python.

Per batch: draw the intended fate → begin → produce one output record per input record →
send the consumer's positions with its group metadata (KIP-447) → commit, or (fate abort)
flush and abort, then rewind like after an abortable error. Errors as in librdkafka's
examples/transactions.c: an abortable error aborts and rewinds to the committed offsets, a
retriable one retries the operation, a fenced or fatal one ends the process.

Mode no-fencing keeps the transactions but gets a fresh transactional.id on every start and
commits the consumer offsets outside the transaction after it commits: a zombie's output
then commits no matter what the group did meanwhile.
"""

from __future__ import annotations

import os
import random
import sys
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from eoschaos.contract.history import HUNG_ERROR_PREFIX, HistoryWriter
from eoschaos.workloads.harness.lineage import TransactionTag, lineage_headers, transform
from eoschaos.workloads.kip447.config import EXIT_HUNG, ProcessorConfig
from eoschaos.workloads.kip447.group_member import GroupMember, offsets_field

# Short enough that an abandoned transaction clears quickly, long enough that an instance frozen
# mid-transaction past its session timeout (a zombie, ~8.5 s) comes back with its transaction
# and its queued records still alive and tries to finish them — the attempt fencing must reject.
TRANSACTION_TIMEOUT_MS = 20000
MESSAGE_TIMEOUT_MS = 15000  # below the transaction timeout, as librdkafka requires
# A timed-out call is retried (its error is retriable), so the timeout only bounds one wait;
# a call still blocked HANG_MARGIN_S past it ignores its timeout (librdkafka #5456: seen in
# every group-coordinator kill of a 6-cell benchmark matrix) and the incarnation is replaced.
# Each second of the hang limit is a second the pipeline stands still, in every such run.
OPERATION_TIMEOUT_S = 10.0
HANG_MARGIN_S = 10.0  # scheduling slack on a loaded 2-core machine
HANG_LIMIT_S = OPERATION_TIMEOUT_S + HANG_MARGIN_S
FENCING_ERRORS = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


class Fenced(Exception):
    """The producer was fenced or hit a fatal error: this incarnation must exit."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class _Abortable(Exception):
    """The current transaction must be aborted (and the consumer rewound)."""


def is_fenced(error: KafkaError) -> bool:
    return error.fatal() or error.code() in FENCING_ERRORS


class TransactionalProcessor:
    def __init__(
        self,
        config: ProcessorConfig,
        history: HistoryWriter,
        instance: int,
        incarnation: int,
        txn_id: str,
        stop: threading.Event,
    ) -> None:
        self._config = config
        self._history = history
        self._stop = stop
        self._identity: dict[str, Any] = {
            "instance": instance,
            "incarnation": incarnation,
            "txn_id": txn_id,
        }
        self._offsets_in_transaction = config.pipeline.mode != "no-fencing"
        self._rng = random.Random(f"{config.pipeline.seed}/{instance}/{incarnation}")
        self._next_seq = 0
        self._producer = self._new_producer()
        self._member = GroupMember(config, history, self._identity)

    def _new_producer(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self._config.bootstrap,
                "transactional.id": self._identity["txn_id"],
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                # A request is given up when the call waiting for it is (librdkafka's default,
                # 60 s, would leave a commit's EndTxn in flight long after its call timed out).
                "socket.timeout.ms": int(OPERATION_TIMEOUT_S * 1000),
                **self._config.settings.client_logging(),
            }
        )

    def _init(self) -> None:
        self._operation("init", lambda: self._producer.init_transactions(OPERATION_TIMEOUT_S))

    def _renew_producer(self) -> None:
        """After a transaction aborted on an error: a new producer, whose init_transactions
        bumps the epoch, so no batch of the next transaction can reuse a sequence number of
        the aborted one under the same epoch.

        eoschaos caught librdkafka 2.16.0 doing exactly that (docs/findings.md): a batch in
        flight to a broker that was killed was written, the transaction aborted, and the
        partition's sequence restarted at that batch's. The next transaction's batch of the
        same size got the same numbers, the broker took it for a retry of the written one and
        answered success, and the transaction committed without those records."""
        self._producer = self._new_producer()  # the old one has nothing left to send
        self._init()

    def run(self) -> None:
        """Process until stop is requested; raises Fenced when this incarnation must exit."""
        try:
            self._init()
            self._member.subscribe()
            while not self._stop.is_set():
                records = self._member.consume()
                if records:
                    self._process(records)
        finally:
            self._member.close()

    def _process(self, records: list[Message]) -> None:
        fate = "abort" if self._rng.random() < self._config.settings.abort_fraction else "commit"
        tag = TransactionTag(
            generation=self._member.generation(),
            fate=fate,
            txn_seq=self._next_seq,
            txn_size=len(records),
            **self._identity,
        )
        self._next_seq += 1
        try:
            self._operation("begin", self._producer.begin_transaction, tag)
            self._produce(records, tag)
            offsets = self._member.positions()
            if self._offsets_in_transaction:
                self._operation("send-offsets", lambda: self._send_offsets(offsets), tag, offsets)
            if fate == "abort":
                self._producer.flush(OPERATION_TIMEOUT_S)  # the aborted records reach the log
                raise _Abortable
            self._operation(
                "commit", lambda: self._producer.commit_transaction(OPERATION_TIMEOUT_S), tag
            )
        except _Abortable as abortable:
            self._operation(
                "abort", lambda: self._producer.abort_transaction(OPERATION_TIMEOUT_S), tag
            )
            self._member.rewind()
            if abortable.__cause__ is not None:  # an error, not an intended abort
                self._renew_producer()
            return
        if not self._offsets_in_transaction and offsets:
            self._commit_offsets(offsets, tag)

    def _send_offsets(self, offsets: list[TopicPartition]) -> None:
        metadata = self._member.consumer.consumer_group_metadata()
        self._producer.send_offsets_to_transaction(offsets, metadata, OPERATION_TIMEOUT_S)

    def _produce(self, records: list[Message], tag: TransactionTag) -> None:
        consumed: dict[int, int] = {}
        try:
            for index, record in enumerate(records):
                self._produce_one(record, tag, index)
                consumed[record.partition()] = record.offset() + 1
        except KafkaException as exc:
            error = exc.args[0]
            self._record("fail", "produce", tag, error=error.name(), count=len(consumed))
            if is_fenced(error):
                raise Fenced(error.name()) from exc
            raise _Abortable from exc  # transactions.c: a failed produce aborts and rewinds
        self._record(
            "ok",
            "produce",
            tag,
            count=len(records),
            offsets=[{"partition": p, "offset": o} for p, o in sorted(consumed.items())],
        )

    def _produce_one(self, record: Message, tag: TransactionTag, index: int) -> None:
        headers = lineage_headers(
            tag, record.topic(), record.partition(), record.offset(), int(record.key()), index
        )
        while True:
            try:
                self._producer.produce(
                    self._config.pipeline.output_topic,
                    key=record.key(),
                    value=transform(record.value()),
                    headers=headers,
                )
                return
            except BufferError:  # local queue full: wait for deliveries, then retry
                self._producer.poll(0.1)

    def _commit_offsets(self, offsets: list[TopicPartition], tag: TransactionTag) -> None:
        """Mode no-fencing: the offsets go to the group after, and apart from, the output."""
        fields = {"offsets": offsets_field(offsets)}
        self._record("invoke", "commit-offsets", tag, **fields)
        try:
            self._member.commit(offsets)
        except KafkaException as exc:
            self._record("fail", "commit-offsets", tag, error=exc.args[0].name(), **fields)
            return
        self._record("ok", "commit-offsets", tag, **fields)

    def _operation(
        self,
        f: str,
        call: Callable[[], object],
        tag: TransactionTag | None = None,
        offsets: list[TopicPartition] | None = None,
    ) -> None:
        """Run one transactional API call, recording invoke and its outcome.

        Retriable errors (the outcome is unknown, e.g. a timed-out commit) are recorded
        `info` and the call is repeated, as librdkafka documents; abortable ones raise
        _Abortable; fenced or fatal ones raise Fenced; anything else propagates.
        """
        fields: dict[str, Any] = {"offsets": offsets_field(offsets)} if offsets else {}
        while True:
            self._record("invoke", f, tag, **fields)
            watchdog = threading.Timer(HANG_LIMIT_S, self._hung, args=(f, tag, fields))
            watchdog.daemon = True
            watchdog.start()
            try:
                call()
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if is_fenced(error):
                    self._record("fail", f, tag, error=error.name(), **fields)
                    raise Fenced(error.name()) from exc
                if error.txn_requires_abort():
                    self._record("fail", f, tag, error=error.name(), **fields)
                    raise _Abortable from exc
                if error.retriable():
                    self._record("info", f, tag, error=error.name(), **fields)
                    print(f"{f}: retrying after {error}", file=sys.stderr)
                    continue
                self._record("fail", f, tag, error=error.name(), **fields)
                raise
            finally:
                watchdog.cancel()
            self._record("ok", f, tag, **fields)
            return

    def _hung(self, f: str, tag: TransactionTag | None, fields: dict[str, Any]) -> None:
        """An API call blocked far past its own timeout: exit, and let the supervisor replace
        this incarnation, as a liveness probe would. librdkafka's send_offsets_to_transaction
        can block forever when the group coordinator dies (librdkafka issues #5456, #5511).
        """
        error = f"{HUNG_ERROR_PREFIX} {f} blocked over {HANG_LIMIT_S:.0f}s"
        self._record("info", f, tag, error=error, **fields)
        self._history.flush()
        print(f"{error}; exiting so a replacement takes over", file=sys.stderr, flush=True)
        os._exit(EXIT_HUNG)

    def _record(self, type_: str, f: str, tag: TransactionTag | None, **fields: Any) -> None:
        if tag is None:
            tag_fields: dict[str, Any] = {**self._identity}
        else:
            tag_fields = {
                **self._identity,
                "generation": tag.generation,
                "fate": tag.fate,
                "txn_seq": tag.txn_seq,
                "txn_size": tag.txn_size,
            }
        self._history.record("txn", type_, f, **tag_fields, **fields)
