package eoschaos.streams;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * The pipeline under test: a 1:1 echo plus a stateful re-key and aggregate.
 *
 * <p>The echo gives the harness one output record per input id to check exactly-once on. The
 * aggregate adds what a stateless copy lacks: a repartition topic (a second consume-produce hop
 * inside the transaction) and a RocksDB store whose changelog must be restored exactly after a
 * crash. Both internal topics are named, so their names are stable:
 * {@code <application.id>-by-bucket-repartition} and {@code <application.id>-bucket-stats-changelog}.
 */
final class BucketTopology {

  static final String REPARTITION = "by-bucket";
  static final String STORE = "bucket-stats";

  private BucketTopology() {}

  static Topology build(Settings settings) {
    StreamsBuilder builder = new StreamsBuilder();
    KStream<String, String> input =
        builder.stream(
            settings.inputTopic(),
            Consumed.with(Serdes.String(), Serdes.String()).withName("input"));

    input.to(
        settings.outputTopic(), Produced.with(Serdes.String(), Serdes.String()).withName("echo"));

    int buckets = settings.buckets();
    input
        .map(
            (id, value) -> {
              long number = Long.parseLong(id);
              return KeyValue.pair(Long.toString(Math.floorMod(number, buckets)), number);
            },
            Named.as("to-bucket"))
        .groupByKey(Grouped.with(REPARTITION, Serdes.String(), Serdes.Long()))
        .aggregate(
            BucketStats::empty,
            (bucket, id, stats) -> stats.add(id),
            Named.as("aggregate"),
            Materialized.<String, BucketStats>as(Stores.persistentTimestampedKeyValueStore(STORE))
                .withKeySerde(Serdes.String())
                .withValueSerde(BucketStats.SERDE))
        .toStream(Named.as("aggregates"))
        .mapValues(BucketStats::toJson, Named.as("to-json"))
        .to(
            settings.aggregateTopic(),
            Produced.with(Serdes.String(), Serdes.String()).withName("aggregate-sink"));
    return builder.build();
  }
}
