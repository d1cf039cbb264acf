"""Spark Structured Streaming as a pipeline under test: Kafka in, a stateless map, Kafka out.

`job` is one instance (a local-mode Spark driver) under the instance contract; `connector`
resolves Spark's Kafka connector jars once, at install time, so no run needs the network.
"""
