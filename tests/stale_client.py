"""A client left from an earlier run: it copies every record of its run's input topic into its
run's output topic, for as long as it lives, and keeps the count of copies in a file.

    python stale_client.py BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC GROUP COUNT_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

from confluent_kafka import Consumer, Producer


def main() -> None:
    bootstrap, input_topic, output_topic, group, count_file = sys.argv[1:6]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap})
    consumer.subscribe([input_topic])
    copied = 0
    Path(count_file).write_text("0")
    while True:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        producer.produce(
            output_topic, message.value(), message.key(), headers=message.headers() or []
        )
        producer.flush(10)
        copied += 1
        Path(count_file).write_text(str(copied))


if __name__ == "__main__":
    main()
