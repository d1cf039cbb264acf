"""A bring-your-own pipeline for the report's XSS test: it copies its input faithfully and, once,
writes records that name no input id and carry markup in key, value and headers.

Each payload, if a browser ran it, would mark the page (`data-pwned` on <body>): the test
opens the report in Chromium and asserts the mark is absent and the payloads show as text.
Run by `eoschaos run --workload byo --command "python tests/byo_hostile.py"`.
"""

from __future__ import annotations

import os

from confluent_kafka import Consumer, Producer

MARK = "document.body.setAttribute('data-pwned','{}')"
# One record naming no id: the checks report all such records as one phantom example, and
# the report shows that example's record, so every payload rides on it. The key also holds
# bytes that are not UTF-8; the value tries to close the table cell it is shown in.
HOSTILE_KEY = b"\xff\xfe<script>" + MARK.format("key").encode() + b"</script>"
HOSTILE_VALUE = f'</td></tr></table><img src=x onerror="{MARK.format("value")}">'.encode()
HOSTILE_HEADERS = [
    (
        f"</textarea><script>{MARK.format('header-name')}</script>",
        f'<svg onload="{MARK.format("header")}">'.encode(),
    ),
]
COPIED_BEFORE_HOSTILE = 20


def main() -> None:
    env = os.environ
    bootstrap = env["EOSCHAOS_BOOTSTRAP_SERVERS"]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": env["EOSCHAOS_GROUP_ID"],
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    consumer.subscribe([env["EOSCHAOS_INPUT_TOPIC"]])
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3}
    )
    output = env["EOSCHAOS_OUTPUT_TOPIC"]
    hostile_due = (env["EOSCHAOS_INSTANCE"], env["EOSCHAOS_INCARNATION"]) == ("0", "0")
    copied = 0
    while True:
        message = consumer.poll(0.2)
        producer.poll(0)
        if message is None or message.error() is not None:
            continue
        # same partition as its input record, so per-partition order is kept
        producer.produce(
            output, key=message.key(), value=message.value(), partition=message.partition()
        )
        copied += 1
        if hostile_due and copied >= COPIED_BEFORE_HOSTILE:
            producer.produce(
                output, key=HOSTILE_KEY, value=HOSTILE_VALUE, headers=HOSTILE_HEADERS, partition=0
            )
            hostile_due = False


if __name__ == "__main__":
    main()
