package eoschaos.streams;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One instance of the eoschaos Kafka Streams workload, run by the eoschaos supervisor.
 *
 * <p>Exit codes: 0 after SIGTERM and a clean close; 1 when the instance failed (a stream thread
 * died, or close did not finish in time), so the supervisor starts the next incarnation; 2 when the
 * environment breaks the instance contract (retrying cannot help).
 */
public final class App {

  private static final Logger LOG = LoggerFactory.getLogger(App.class);
  private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(20);

  /** What the shutdown hook exits with: 0 unless the instance failed before the JVM stopped. */
  private static volatile int exitStatus = 0;

  private App() {}

  public static void main(String[] args) throws InterruptedException {
    Settings settings;
    try {
      settings = Settings.fromEnvironment(System.getenv());
    } catch (IllegalArgumentException e) {
      System.err.println("eoschaos-streams: " + e.getMessage());
      System.exit(2);
      return;
    }
    Topology topology = BucketTopology.build(settings);
    LOG.info(
        "Kafka Streams {} instance {} incarnation {}, {}, {} buckets\n{}",
        kafkaVersion(),
        settings.instance(),
        settings.incarnation(),
        settings.exactlyOnce() ? "exactly_once_v2" : "at_least_once",
        settings.buckets(),
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
    // A dead stream thread shuts the whole client down and the JVM exits 1, instead of
    // REPLACE_THREAD: the supervisor then records the failure as an instance exit in the history
    // and starts a fresh incarnation, as a deployment would. A silently replaced thread would hide
    // the failure from the report. (Retriable faults, fencing and rebalances are handled inside
    // Streams and never reach this handler.)
    streams.setUncaughtExceptionHandler(
        error -> {
          LOG.error("stream thread failed; shutting this instance down", error);
          return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(new Thread(() -> closeAndHalt(streams), "eoschaos-shutdown"));

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

  /**
   * Runs on SIGTERM (and on exit after a failure): close Streams, which commits or aborts the
   * current transaction, then end the JVM with {@link #exitStatus}. Halting is needed because a JVM
   * stopped by SIGTERM otherwise exits 143 even after its shutdown hooks completed.
   */
  private static void closeAndHalt(KafkaStreams streams) {
    LOG.info("closing (up to {} s)", CLOSE_TIMEOUT.toSeconds());
    boolean closed = streams.close(CLOSE_TIMEOUT);
    if (!closed) {
      LOG.error("Kafka Streams did not close within {} s", CLOSE_TIMEOUT.toSeconds());
      exitStatus = 1;
    }
    LOG.info("exiting with status {}", exitStatus);
    System.out.flush();
    Runtime.getRuntime().halt(exitStatus);
  }

  /**
   * The Kafka clients' version, from the resource every kafka-clients jar carries: the class that
   * reads it (AppInfoParser) is internal and moved package in 4.4, so the app reads it itself.
   */
  private static String kafkaVersion() {
    Properties props = new Properties();
    String resource = "/kafka/kafka-version.properties";
    try (InputStream in = KafkaStreams.class.getResourceAsStream(resource)) {
      if (in != null) {
        props.load(in);
      }
    } catch (IOException e) {
      LOG.warn("could not read the Kafka version", e);
    }
    return props.getProperty("version", "unknown");
  }
}
