"""The input: N records with unique ids, produced at a steady pace so input flows during faults.

Writer `seeder`. An idempotent producer with acks=all and one request in flight per broker
(IDEMPOTENT_MAX_IN_FLIGHT) by default; with `non_idempotent` a producer that retries without
idempotence, which duplicates records in the input itself when an ack is delayed past the
request timeout (NON_IDEMPOTENT_REQUEST_TIMEOUT_MS, short as in a producer tuned for latency, so
a `latency` fault of a second or more exceeds it).
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer

from eoschaos.contract.history import SEEDER, HistoryWriter
from eoschaos.workloads.harness.input_records import RecordFunction, seeded

STOP_FLUSH_TIMEOUT_S = 15.0
NON_IDEMPOTENT_REQUEST_TIMEOUT_MS = 1000
# librdkafka (2.16) bumps the idempotent producer's epoch for ALL partitions when a second
# in-flight request of one partition fails out of order after a leader change, and re-sends
# every queued batch under the new epoch, including a batch of another partition that the dead
# leader had in fact written: that record lands twice (librdkafka #4953, docs/findings.md). With
# one request in flight per connection no partition ever has a second one, so that path is shut;
# the seeder's paced rate needs no more.
IDEMPOTENT_MAX_IN_FLIGHT = 1


def seeder_producer_config(bootstrap: str, non_idempotent: bool) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": not non_idempotent,
        "log_level": 3,
        "max.in.flight.requests.per.connection": 5 if non_idempotent else IDEMPOTENT_MAX_IN_FLIGHT,
    }
    if non_idempotent:
        config.update(
            {
                "retries": 2147483647,
                # librdkafka times a ProduceRequest out by socket.timeout.ms (request.timeout.ms
                # is the broker's ack timeout); a timed-out request is retried, possibly a
                # second time on the log
                "request.timeout.ms": NON_IDEMPOTENT_REQUEST_TIMEOUT_MS,
                "socket.timeout.ms": NON_IDEMPOTENT_REQUEST_TIMEOUT_MS,
            }
        )
    return config


class Seeder(threading.Thread):
    """Produces ids 0..records-1, each id's record (`record_of`) to the record's topic (by
    default input topic id mod topics), each topic's records to its partitions in turn.

    Choosing the partition here (instead of the producer's hash) spreads the ids evenly and
    lets the `send` invoke event name the partition before the producer has seen the record.
    """

    def __init__(
        self,
        bootstrap: str,
        run_dir: Path,
        topics: dict[str, int],
        records: int,
        seconds: float,
        *,
        non_idempotent: bool = False,
        hold: Callable[[], bool] | None = None,
        ready: Callable[[], bool] | None = None,
        record_of: RecordFunction = seeded,
    ) -> None:
        super().__init__(name=SEEDER, daemon=True)
        self._record_of = record_of
        self._hold = hold or (lambda: False)
        self._ready = ready or (lambda: True)  # the schedule starts once this said yes
        self.held_s = 0.0  # seconds the input was held back by `hold`
        self._producer_config = seeder_producer_config(bootstrap, non_idempotent)
        self._history = HistoryWriter(run_dir, SEEDER)
        self._topics = topics  # input topic -> its partitions
        self._order = list(topics)
        self._sent_to = dict.fromkeys(topics, 0)  # records sent to each topic so far
        self._records = records
        self._seconds = seconds
        self._unreported: dict[int, tuple[str, int]] = {}  # id -> its topic and partition
        self._sent = 0
        self.acked = 0  # records with a successful delivery report
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._all_reported = threading.Event()
        self.failure: Exception | None = None

    def wait_reported(self, timeout: float) -> bool:
        """True once every record has its delivery report (ok or fail)."""
        return self._all_reported.wait(timeout)

    def stop(self) -> None:
        """Stop sending; wait a while for outstanding reports; the rest are recorded `info`."""
        self._stop_requested.set()
        if self.ident is None:  # never started: nothing was sent
            self._history.close()
        else:
            self.join()

    def run(self) -> None:
        # The producer lives exactly as long as this thread: a handle left behind keeps
        # reconnecting to a stopped cluster, logging every refusal after the run has ended.
        producer = Producer(self._producer_config)
        try:
            self._send_all(producer)
            while not self._all_reported.is_set() and not self._stop_requested.is_set():
                producer.poll(0.1)
        except Exception as exc:  # kept for stop()'s caller: the input is short
            self.failure = exc
        finally:
            producer.flush(STOP_FLUSH_TIMEOUT_S)
            with self._lock:
                for record_id, (topic, partition) in sorted(self._unreported.items()):
                    self._history.record(
                        "send",
                        "info",
                        "send",
                        id=record_id,
                        topic=topic,
                        partition=partition,
                        error="unreported",
                    )
            self._history.close()

    def _send_all(self, producer: Producer) -> None:
        """Record i is due `i * interval` after the start (the pipeline ready for input),
        plus every second spent held."""
        while not self._ready() and not self._stop_requested.is_set():
            producer.poll(0.1)
        start = last = time.monotonic()
        interval = self._seconds / max(1, self._records)
        for record_id in range(self._records):
            while not self._stop_requested.is_set():
                now = time.monotonic()
                elapsed, last = now - last, now
                if self._hold():
                    self.held_s += elapsed
                    producer.poll(0.1)
                    continue
                wait = start + self.held_s + record_id * interval - now
                if wait <= 0:
                    break
                producer.poll(min(wait, 0.1))
            if self._stop_requested.is_set():
                return
            self._send(producer, record_id)
        if not self._records:
            self._all_reported.set()

    def _send(self, producer: Producer, record_id: int) -> None:
        record = self._record_of(record_id)
        topic = record.topic or self._order[record_id % len(self._order)]
        partition = self._sent_to[topic] % self._topics[topic]
        self._sent_to[topic] += 1
        with self._lock:
            self._unreported[record_id] = (topic, partition)
            self._sent += 1
        self._history.record(
            "send", "invoke", "send", id=record_id, topic=topic, partition=partition
        )
        while True:
            try:
                producer.produce(
                    topic,
                    key=record.key,
                    value=record.value,
                    headers=list(record.headers) or None,
                    partition=partition,
                    on_delivery=functools.partial(self._delivered, record_id, topic),
                )
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
        producer.poll(0)

    def _delivered(
        self, record_id: int, topic: str, error: KafkaError | None, message: Message
    ) -> None:
        if error is None:
            self.acked += 1
            self._history.record(
                "send",
                "ok",
                "send",
                id=record_id,
                topic=topic,
                partition=message.partition(),
                offset=message.offset(),
            )
        else:
            print(f"seeder: delivery of {record_id} failed: {error}", file=sys.stderr)
            self._history.record(
                "send", "fail", "send", id=record_id, topic=topic, error=error.name()
            )
        with self._lock:
            self._unreported.pop(record_id, None)
            if not self._unreported and self._sent == self._records:
                self._all_reported.set()
