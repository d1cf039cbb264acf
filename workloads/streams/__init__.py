"""The Kafka Streams workload: a stateful Streams app (echo plus re-key and aggregate).

The app itself is a Maven project in app/; build.py compiles it against the Kafka version under
test and returns the command that starts one instance under the eoschaos instance contract.
"""
