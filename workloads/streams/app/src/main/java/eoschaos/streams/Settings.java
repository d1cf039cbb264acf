package eoschaos.streams;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.streams.StreamsConfig;

/**
 * What one instance is told through the eoschaos instance contract: environment variables only.
 *
 * <p>EOSCHAOS_TRANSACTIONAL_ID is deliberately ignored. Under exactly_once_v2 Kafka Streams derives
 * each producer's transactional.id from application.id (plus its process id and thread), and a
 * hand-set transactional.id is rejected by StreamsConfig.
 */
record Settings(
    String bootstrapServers,
    String inputTopic,
    String outputTopic,
    String aggregateTopic,
    String applicationId,
    String stateDir,
    boolean exactlyOnce,
    int instance,
    int incarnation,
    int buckets,
    Map<String, String> overrides) {

  static final int DEFAULT_BUCKETS = 10;

  /** Reads the contract; an IllegalArgumentException names the variable that is missing or bad. */
  static Settings fromEnvironment(Map<String, String> env) {
    String mode = required(env, "EOSCHAOS_MODE");
    if (!mode.equals("eos") && !mode.equals("alos")) {
      throw new IllegalArgumentException(
          "EOSCHAOS_MODE=" + mode + " is not a mode of the streams workload; use eos or alos");
    }
    return new Settings(
        required(env, "EOSCHAOS_BOOTSTRAP_SERVERS"),
        required(env, "EOSCHAOS_INPUT_TOPIC"),
        required(env, "EOSCHAOS_OUTPUT_TOPIC"),
        required(env, "EOSCHAOS_AGGREGATE_TOPIC"),
        required(env, "EOSCHAOS_GROUP_ID"),
        required(env, "EOSCHAOS_STATE_DIR"),
        mode.equals("eos"),
        number(env, "EOSCHAOS_INSTANCE", null, 0),
        number(env, "EOSCHAOS_INCARNATION", null, 0),
        number(env, "EOSCHAOS_BUCKETS", DEFAULT_BUCKETS, 1),
        overrides(env.getOrDefault("EOSCHAOS_STREAMS_CONFIG", "")));
  }

  /**
   * Streams settings a run asks for over the app's own, "KEY=VALUE,KEY=VALUE" (the harness
   * checked the form). One key is the app's, not Kafka's: {@link WriteBufferSize#CONFIG}.
   */
  private static Map<String, String> overrides(String line) {
    Map<String, String> settings = new LinkedHashMap<>();
    for (String pair : line.split(",")) {
      if (pair.isBlank()) {
        continue;
      }
      int equals = pair.indexOf('=');
      if (equals <= 0) {
        throw new IllegalArgumentException(
            "EOSCHAOS_STREAMS_CONFIG: " + pair + " is not KEY=VALUE");
      }
      settings.put(pair.substring(0, equals).trim(), pair.substring(equals + 1).trim());
    }
    return settings;
  }

  /**
   * The Streams configuration. Choices beyond the defaults, and why:
   *
   * <ul>
   *   <li>commit.interval.ms left at Streams' default for each guarantee (100 ms for EOS, 30 s
   *       for ALOS): the app runs as shipped, and a crash under ALOS re-processes everything
   *       since the last commit, which is what users of the default get. (With ALOS at 100 ms
   *       the duplicates of a crash at a low input rate were sometimes none at all.)
   *   <li>session.timeout.ms 6000 (the broker's minimum) and heartbeat.interval.ms 1500 on the
   *       consumers, so a killed or paused instance's tasks move to a live one within ~10 s.
   *   <li>transaction.timeout.ms 10000 (eos): the broker aborts a dead instance's open transaction
   *       soon, so read_committed readers are not blocked for the default minute.
   *   <li>request.timeout.ms 5000 on the producer (eos): a request that gets no answer is given up
   *       and retried on a new connection well inside that transaction timeout (the default,
   *       30 s, outlives the transaction, so a retried commit would only meet a transaction the
   *       broker had already aborted).
   *   <li>client.id names the instance and incarnation, so broker logs say who did what.
   * </ul>
   *
   * <p>Then whatever the run asked for (EOSCHAOS_STREAMS_CONFIG), over all of these.
   */
  Properties streamsProperties() {
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.CLIENT_ID_CONFIG, "eoschaos-streams-" + instance + "-" + incarnation);
    props.put(
        StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
        exactlyOnce ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
    props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
    if (exactlyOnce) {
      props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);
      props.put(StreamsConfig.producerPrefix(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG), 5000);
    }
    props.putAll(overrides);
    if (overrides.containsKey(WriteBufferSize.CONFIG)) {
      props.put(StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG, WriteBufferSize.class);
    }
    return props;
  }

  private static String required(Map<String, String> env, String name) {
    String value = env.get(name);
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException(name + " is not set; the harness must pass it");
    }
    return value;
  }

  private static int number(Map<String, String> env, String name, Integer fallback, int minimum) {
    String value = env.get(name);
    if (value == null && fallback != null) {
      return fallback;
    }
    try {
      int parsed = Integer.parseInt(value == null ? "" : value.trim());
      if (parsed >= minimum) {
        return parsed;
      }
    } catch (NumberFormatException e) {
      // reported below, with the variable's name
    }
    throw new IllegalArgumentException(
        name + "=" + value + " is not a whole number >= " + minimum);
  }
}
