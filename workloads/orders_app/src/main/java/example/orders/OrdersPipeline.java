package example.orders;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Kafka Streams pipeline of JSON orders from several shops, each shop its own input topic:
 * accepted orders go enriched to the output topic, rejected ones to a dead-letter topic. It reads
 * its topics and settings from eoschaos' instance contract (docs/byo.md), as a deployment would
 * read them from its own configuration.
 *
 * <p>With {@code --dead-letters-outside-transaction} it is the known-bad variant: rejected orders
 * go through a producer of its own, as from an error handler, instead of through Streams. That
 * producer is outside the Streams transaction, so orders processed again after a crash or a
 * rebalance are dead-lettered again (and one sent but not yet flushed when the process died is
 * lost while its input offset commits).
 *
 * <p>Exit codes: 0 after SIGTERM and a clean close; 1 when the instance failed; 2 when the
 * environment lacks a setting (retrying cannot help).
 */
public final class OrdersPipeline {

  private static final Logger LOG = LoggerFactory.getLogger(OrdersPipeline.class);
  private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(20);
  private static final String OUTSIDE_TRANSACTION = "--dead-letters-outside-transaction";

  private static volatile int exitStatus = 0;

  private OrdersPipeline() {}

  /** The settings of one instance, from the environment eoschaos gives it. */
  record Settings(
      String bootstrapServers,
      List<String> inputTopics,
      String outputTopic,
      String deadLetterTopic,
      String applicationId,
      String stateDir,
      boolean exactlyOnce,
      String clientId) {

    static Settings fromEnvironment(Map<String, String> env) {
      String inputs = env.getOrDefault("EOSCHAOS_INPUT_TOPICS", "");
      String deadLetters = env.getOrDefault("EOSCHAOS_DEAD_LETTER_TOPICS", "");
      if (deadLetters.isBlank()) {
        throw new IllegalArgumentException(
            "EOSCHAOS_DEAD_LETTER_TOPICS is empty; run with --dead-letter-topics NAME");
      }
      return new Settings(
          required(env, "EOSCHAOS_BOOTSTRAP_SERVERS"),
          Arrays.asList((inputs.isBlank() ? required(env, "EOSCHAOS_INPUT_TOPIC") : inputs).split(",")),
          required(env, "EOSCHAOS_OUTPUT_TOPIC"),
          deadLetters.split(",")[0],
          required(env, "EOSCHAOS_GROUP_ID"),
          required(env, "EOSCHAOS_STATE_DIR"),
          !"alos".equals(env.get("EOSCHAOS_MODE")),
          "orders-" + env.getOrDefault("EOSCHAOS_INSTANCE", "0")
              + "-" + env.getOrDefault("EOSCHAOS_INCARNATION", "0"));
    }

    /**
     * Streams' settings. Beyond the defaults: exactly_once_v2 (at_least_once in mode alos);
     * transactions of a second (commit.interval.ms 1000: fewer commits and markers, and a crash
     * makes Streams process at most a second's orders again, which exactly-once makes harmless);
     * a member that dies is replaced within seconds (session.timeout.ms 6000), and the broker
     * aborts a dead member's transaction after 10 s instead of a minute.
     */
    Properties streamsProperties() {
      Properties props = new Properties();
      props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
      props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
      props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
      props.put(StreamsConfig.CLIENT_ID_CONFIG, clientId);
      props.put(
          StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
          exactlyOnce ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
      props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
      props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
      props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
      props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);
      props.put(StreamsConfig.producerPrefix(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG), 5000);
      return props;
    }

    private static String required(Map<String, String> env, String name) {
      String value = env.get(name);
      if (value == null || value.isBlank()) {
        throw new IllegalArgumentException(name + " is not set");
      }
      return value;
    }
  }

  /**
   * The topology: each input topic's orders routed (the topic names the shop), accepted ones to
   * the output, rejected ones to the dead-letter topic -- through Streams, or, in the known-bad
   * variant, through `deadLetters`, a producer outside the transaction.
   */
  static Topology topology(Settings settings, KafkaProducer<String, String> deadLetters) {
    StreamsBuilder builder = new StreamsBuilder();
    KStream<String, Orders.Routed> routed = null;
    for (String topic : settings.inputTopics()) {
      KStream<String, Orders.Routed> shop =
          builder.stream(topic, Consumed.with(Serdes.String(), Serdes.String()))
              .mapValues(value -> Orders.route(value, topic));
      routed = routed == null ? shop : routed.merge(shop);
    }
    Map<String, KStream<String, Orders.Routed>> branches =
        routed
            .split(Named.as("orders-"))
            .branch((key, order) -> order.accepted(), Branched.as("accepted"))
            .defaultBranch(Branched.as("rejected"));
    Produced<String, String> asText = Produced.with(Serdes.String(), Serdes.String());
    branches.get("orders-accepted").mapValues(Orders.Routed::json).to(settings.outputTopic(), asText);
    KStream<String, String> rejected = branches.get("orders-rejected").mapValues(Orders.Routed::json);
    if (deadLetters == null) {
      rejected.to(settings.deadLetterTopic(), asText);
    } else {
      rejected.foreach(
          (key, value) -> deadLetters.send(new ProducerRecord<>(settings.deadLetterTopic(), key, value)));
    }
    return builder.build();
  }

  public static void main(String[] args) throws InterruptedException {
    Settings settings;
    try {
      settings = Settings.fromEnvironment(System.getenv());
    } catch (IllegalArgumentException e) {
      System.err.println("orders-pipeline: " + e.getMessage());
      System.exit(2);
      return;
    }
    KafkaProducer<String, String> deadLetters =
        Arrays.asList(args).contains(OUTSIDE_TRANSACTION) ? ownProducer(settings) : null;
    Topology topology = topology(settings, deadLetters);
    LOG.info(
        "{} reading {}, {}{}\n{}",
        settings.clientId(),
        settings.inputTopics(),
        settings.exactlyOnce() ? "exactly_once_v2" : "at_least_once",
        deadLetters == null ? "" : ", dead letters outside the transaction",
        topology.describe());
    KafkaStreams streams = new KafkaStreams(topology, settings.streamsProperties());
    CountDownLatch failed = new CountDownLatch(1);
    streams.setStateListener(
        (now, before) -> {
          LOG.info("state {} -> {}", before, now);
          if (now == KafkaStreams.State.ERROR) {
            failed.countDown();
          }
        });
    // A failed stream thread ends the process (exit 1) for the supervisor to restart, as a
    // deployment's would, rather than being replaced unseen inside it.
    streams.setUncaughtExceptionHandler(
        error -> {
          LOG.error("stream thread failed; stopping", error);
          return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(new Thread(() -> closeAndHalt(streams, deadLetters), "orders-shutdown"));
    try {
      streams.start();
    } catch (RuntimeException e) {
      LOG.error("could not start Kafka Streams", e);
      failed.countDown();
    }
    failed.await();
    exitStatus = 1;
    System.exit(1);
  }

  private static KafkaProducer<String, String> ownProducer(Settings settings) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, settings.bootstrapServers());
    props.put(ProducerConfig.CLIENT_ID_CONFIG, settings.clientId() + "-dead-letters");
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
  }

  /**
   * On SIGTERM: close Streams (which commits or aborts its transaction), then halt with the
   * status, since a JVM stopped by SIGTERM otherwise exits 143 after its hooks.
   */
  private static void closeAndHalt(KafkaStreams streams, KafkaProducer<String, String> deadLetters) {
    if (!streams.close(CLOSE_TIMEOUT)) {
      LOG.error("Kafka Streams did not close within {} s", CLOSE_TIMEOUT.toSeconds());
      exitStatus = 1;
    }
    if (deadLetters != null) {
      deadLetters.close(CLOSE_TIMEOUT);
    }
    LOG.info("exiting with status {}", exitStatus);
    Runtime.getRuntime().halt(exitStatus);
  }
}
