"""An example of docs/byo.md's `--input`: a pipeline judged on records of its own.

`order` is the input: one JSON order per id, keyed by its customer, e.g. key `customer-3`,
value {"order_id": 17, "customer": "customer-3", "amount_cents": 1250}. Running this module
starts one instance of a pipeline that parses those orders and writes each one enriched
({"order_id", "customer", "amount", "tax"}) under the same key. Neither knows eoschaos' own
record format; the run finds each order by its `order_id` (`--id-from json:order_id`, which
the input defaults to).

In mode `eos` it reads read_committed and writes each batch in a transaction with the batch's
offsets (KIP-447): a crash aborts the batch, and its successor reads it again. In mode `alos`
it writes, waits for the acks, and only then stores the offsets, which the consumer commits
every second: a crash between the two writes the orders since the last commit twice.

    eoschaos run --workload byo --command "python -m eoschaos.workloads.byo_orders" \\
        --input eoschaos.workloads.byo_orders:order --id-from json:order_id --faults crash

It reads every input topic of the run, and rejects an order without a positive amount: to
the run's dead-letter topic if it has one, else to the output as it came. Every order also
goes, as it came, to each fan-out topic of the run (an audit log). `two_shops` is the
input of such a run: orders from a web shop and a store (topics `web-orders` and
`shop-orders`), one in REJECTED_EVERY without an amount. With `--dead-letters-twice` it is
the known-bad pipeline that forgets to stop after the dead-letter write: a rejected order
lands in both topics.

    eoschaos run --workload byo \\
        --command "python -m eoschaos.workloads.byo_orders" \\
        --input eoschaos.workloads.byo_orders:two_shops --id-from json:order_id \\
        --input-topics web-orders,shop-orders --output-topics enriched-orders \\
        --dead-letter-topics rejected-orders --faults crash
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from eoschaos.contract import instance_env

CUSTOMERS = 50
TAX_RATE = 0.2
BATCH_RECORDS = 200
POLL_S = 0.5
COMMIT_INTERVAL_MS = 1000  # alos: how much a crash may write twice
# A crashed member holds its partitions until its session expires: with librdkafka's 45 s, a
# few crashes stall the output for a minute and more.
SESSION_TIMEOUT_MS = 6000
TRANSACTION_TIMEOUT_S = 10.0


def order(record_id: int, seed: int) -> dict:
    """The input record of one order id: a customer and an amount drawn from (seed, id)."""
    rng = random.Random(seed * 1_000_003 + record_id)
    customer = f"customer-{rng.randrange(CUSTOMERS)}"
    value = {"order_id": record_id, "customer": customer, "amount_cents": rng.randrange(100, 50000)}
    return {"key": customer, "value": value}


SHOPS = ("web-orders", "shop-orders")
REJECTED_EVERY = 20


def two_shops(record_id: int, seed: int) -> dict:
    """An order of one of two shops, each its own input topic; every REJECTED_EVERY-th one
    has no amount, which the pipeline rejects."""
    record = order(record_id, seed)
    record["topic"] = SHOPS[random.Random(seed * 7 + record_id).randrange(len(SHOPS))]
    if record_id % REJECTED_EVERY == REJECTED_EVERY - 1:
        del record["value"]["amount_cents"]
    return record


def accepted(raw: bytes) -> bool:
    """An order this pipeline can enrich: one with a positive amount."""
    amount = json.loads(raw).get("amount_cents")
    return isinstance(amount, int) and amount > 0


def enriched(raw: bytes) -> bytes:
    """An order with its amount in units and its tax: what this pipeline is for."""
    placed = json.loads(raw)
    amount = placed["amount_cents"] / 100
    return json.dumps(
        {
            "order_id": placed["order_id"],
            "customer": placed["customer"],
            "amount": amount,
            "tax": round(amount * TAX_RATE, 2),
        }
    ).encode()


def run() -> None:
    """One instance, configured by the EOSCHAOS_* environment, until SIGTERM."""
    env = os.environ
    transactional = env[instance_env.MODE] == "eos"
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    common = {"bootstrap.servers": env[instance_env.BOOTSTRAP_SERVERS], "log_level": 3}
    consumer = Consumer(
        {
            **common,
            "group.id": env[instance_env.GROUP_ID],
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": not transactional,
            "enable.auto.offset.store": False,
            "auto.commit.interval.ms": COMMIT_INTERVAL_MS,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": SESSION_TIMEOUT_MS // 3,
        }
    )
    producer = Producer(
        {**common, "acks": "all", "transactional.id": env[instance_env.TRANSACTIONAL_ID]}
        if transactional
        else {**common, "acks": "all", "enable.idempotence": True}
    )
    if transactional:
        producer.init_transactions()
    output = env[instance_env.OUTPUT_TOPIC]
    dead_letters = env.get(instance_env.DEAD_LETTER_TOPICS, "").split(",")[0]
    copies = tuple(filter(None, env.get(instance_env.FAN_OUT_TOPICS, "").split(",")))
    routes = Routes(output, dead_letters or output, copies, "--dead-letters-twice" in sys.argv[1:])
    inputs = env.get(instance_env.INPUT_TOPICS) or env[instance_env.INPUT_TOPIC]
    consumer.subscribe(inputs.split(","))
    while not stop.is_set():
        batch = [m for m in consumer.consume(BATCH_RECORDS, POLL_S) if m.error() is None]
        if batch:
            (_write_transaction if transactional else _write_then_store)(
                consumer, producer, routes, batch
            )
    consumer.close()


@dataclass(frozen=True)
class Routes:
    """Where an order goes: enriched to the output, rejected to the dead-letter topic (and,
    known-bad, to the output too); and as it came to every fan-out topic (an audit log)."""

    output: str
    dead_letters: str
    copies: tuple[str, ...] = ()
    rejected_twice: bool = False

    def produce(self, producer: Producer, message: Message) -> None:
        for topic in self.copies:
            producer.produce(topic, key=message.key(), value=message.value())
        if accepted(message.value()):
            producer.produce(self.output, key=message.key(), value=enriched(message.value()))
            return
        producer.produce(self.dead_letters, key=message.key(), value=message.value())
        if self.rejected_twice and self.dead_letters != self.output:
            producer.produce(self.output, key=message.key(), value=message.value())


def _write_transaction(
    consumer: Consumer, producer: Producer, routes: Routes, batch: list[Message]
) -> None:
    """The batch's orders and its offsets in one transaction; on an error, aborted and read
    again from the group's committed offsets."""
    producer.begin_transaction()
    try:
        for message in batch:
            routes.produce(producer, message)
        producer.send_offsets_to_transaction(
            _next_offsets(batch), consumer.consumer_group_metadata(), TRANSACTION_TIMEOUT_S
        )
        producer.commit_transaction(TRANSACTION_TIMEOUT_S)
    except KafkaException as exc:
        if not exc.args[0].txn_requires_abort():
            raise  # fenced, fatal or undecided: this incarnation ends, its successor fences it
        producer.abort_transaction(TRANSACTION_TIMEOUT_S)
        for committed in consumer.committed(consumer.assignment(), TRANSACTION_TIMEOUT_S):
            start = committed.offset if committed.offset >= 0 else OFFSET_BEGINNING
            consumer.seek(TopicPartition(committed.topic, committed.partition, start))


def _next_offsets(batch: list[Message]) -> list[TopicPartition]:
    """Per partition of the batch, the offset after its last record: what the group reads next."""
    last: dict[tuple[str, int], int] = {}
    for message in batch:
        last[(message.topic(), message.partition())] = message.offset()
    return [TopicPartition(topic, p, offset + 1) for (topic, p), offset in last.items()]


def _write_then_store(
    consumer: Consumer, producer: Producer, routes: Routes, batch: list[Message]
) -> None:
    for message in batch:
        routes.produce(producer, message)
    producer.flush()
    for message in batch:
        consumer.store_offsets(message)


if __name__ == "__main__":
    run()
