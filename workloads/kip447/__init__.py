"""The KIP-447 consume-transform-produce pipeline: Kafka's exactly-once example, in Python.

A port of Kafka's examples (KafkaExactlyOnceDemo, ExactlyOnceMessageProcessor) with the abort
and rebalance handling of librdkafka's examples/transactions.c. `workload.Kip447Workload` runs
it: a seeder, K processor processes under a supervisor, a downstream observer, and the final
scans; every part writes its own history file (docs/history.md).
"""
