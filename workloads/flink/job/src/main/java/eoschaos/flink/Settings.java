package eoschaos.flink;

import java.util.Map;

/**
 * What the job is told through the environment of the JobManager that runs its main.
 *
 * <p>EOSCHAOS_TRANSACTIONAL_ID is not used: the KafkaSink names its transactions itself, from the
 * prefix, the subtask and the checkpoint (EOSCHAOS_FLINK_TRANSACTIONAL_ID_PREFIX is the prefix).
 */
record Settings(
    String bootstrapServers,
    String inputTopic,
    String outputTopic,
    String aggregateTopic,
    String groupId,
    String transactionalIdPrefix,
    boolean exactlyOnce,
    int parallelism,
    int buckets,
    long checkpointIntervalMs,
    long transactionTimeoutMs) {

  static Settings fromEnvironment(Map<String, String> env) {
    String mode = required(env, "EOSCHAOS_MODE");
    if (!mode.equals("eos") && !mode.equals("alos")) {
      throw new IllegalArgumentException(
          "EOSCHAOS_MODE=" + mode + " is not a mode of the flink workload; use eos or alos");
    }
    return new Settings(
        required(env, "EOSCHAOS_BOOTSTRAP_SERVERS"),
        required(env, "EOSCHAOS_INPUT_TOPIC"),
        required(env, "EOSCHAOS_OUTPUT_TOPIC"),
        required(env, "EOSCHAOS_AGGREGATE_TOPIC"),
        required(env, "EOSCHAOS_GROUP_ID"),
        required(env, "EOSCHAOS_FLINK_TRANSACTIONAL_ID_PREFIX"),
        mode.equals("eos"),
        number(env, "EOSCHAOS_FLINK_PARALLELISM", 1),
        number(env, "EOSCHAOS_BUCKETS", 1),
        number(env, "EOSCHAOS_FLINK_CHECKPOINT_INTERVAL_MS", 100),
        number(env, "EOSCHAOS_FLINK_TRANSACTION_TIMEOUT_MS", 1000));
  }

  private static String required(Map<String, String> env, String name) {
    String value = env.get(name);
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException(name + " is not set; the harness must pass it");
    }
    return value;
  }

  private static int number(Map<String, String> env, String name, int minimum) {
    String value = required(env, name);
    try {
      int parsed = Integer.parseInt(value.trim());
      if (parsed >= minimum) {
        return parsed;
      }
    } catch (NumberFormatException e) {
      // reported below, with the variable's name
    }
    throw new IllegalArgumentException(name + "=" + value + " is not a whole number >= " + minimum);
  }
}
