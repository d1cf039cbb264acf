"""The environment every workload instance is started with: the contract between eoschaos and
a pipeline, bring-your-own ones included (docs/byo.md lists what each variable holds)."""

BOOTSTRAP_SERVERS = "EOSCHAOS_BOOTSTRAP_SERVERS"  # the instance's own client lane, if it has one
INPUT_TOPIC = "EOSCHAOS_INPUT_TOPIC"  # the first input topic
OUTPUT_TOPIC = "EOSCHAOS_OUTPUT_TOPIC"  # the first output topic
INPUT_TOPICS = "EOSCHAOS_INPUT_TOPICS"  # every input topic, comma-separated
OUTPUT_TOPICS = "EOSCHAOS_OUTPUT_TOPICS"  # every output topic, comma-separated
DEAD_LETTER_TOPICS = "EOSCHAOS_DEAD_LETTER_TOPICS"  # comma-separated; empty: none
FAN_OUT_TOPICS = "EOSCHAOS_FAN_OUT_TOPICS"  # comma-separated; empty: none
MODE = "EOSCHAOS_MODE"
INSTANCE = "EOSCHAOS_INSTANCE"
INCARNATION = "EOSCHAOS_INCARNATION"
INSTANCES = "EOSCHAOS_INSTANCES"
PARTITIONS = "EOSCHAOS_PARTITIONS"
GROUP_ID = "EOSCHAOS_GROUP_ID"
TRANSACTIONAL_ID = "EOSCHAOS_TRANSACTIONAL_ID"  # empty in modes without transactions
STATE_DIR = "EOSCHAOS_STATE_DIR"  # the instance's own, kept across its incarnations
LOG_DIR = "EOSCHAOS_LOG_DIR"
# Set by the user where a run starts: librdkafka's debug contexts (e.g. "cgrp,fetch") for the
# kip447 processors' clients, logged to each instance's stderr.
LIBRDKAFKA_DEBUG = "EOSCHAOS_LIBRDKAFKA_DEBUG"

# Set on every process eoschaos starts (brokers, Toxiproxy, instances, their children inherit
# them), so that nothing it started can outlive it unnoticed:
OWNER_DIR = "EOSCHAOS_OWNER_DIR"  # the run dir that started it: cleanup finds it by this
PARENT_PID = "EOSCHAOS_PARENT_PID"  # the harness that started it: gone, the process exits
