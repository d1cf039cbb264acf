"""The Flink workload: a Flink job (Kafka source, keyed state, exactly-once KafkaSink) on a real
Flink cluster of a JobManager and TaskManagers. The job is a Maven project in job/; build.py
compiles it with Flink's runtime; pipeline.py runs the cluster's processes as instances.
"""
