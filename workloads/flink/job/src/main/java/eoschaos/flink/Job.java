package eoschaos.flink;

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeHint;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The eoschaos Flink workload: Kafka source (read_committed) → keyed by bucket → KafkaSink.
 *
 * <p>Each input record (key: its id) is written once to the output topic as it came, and the
 * bucket's running count/sum/min/max (keyed state, restored from the checkpoint) to the aggregate
 * topic, both through one sink: under EXACTLY_ONCE both land in the checkpoint's transaction. The
 * JobManager runs this main in application mode; the harness passes everything in the environment
 * (docs/byo.md's contract plus the EOSCHAOS_FLINK_* variables of workloads/flink/pipeline.py).
 */
public final class Job {

  private Job() {}

  public static void main(String[] args) throws Exception {
    Settings settings;
    try {
      settings = Settings.fromEnvironment(System.getenv());
    } catch (IllegalArgumentException e) {
      System.err.println("eoschaos-flink: " + e.getMessage());
      System.exit(2);
      return;
    }
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(settings.parallelism());
    env.enableCheckpointing(
        settings.checkpointIntervalMs(),
        settings.exactlyOnce() ? CheckpointingMode.EXACTLY_ONCE : CheckpointingMode.AT_LEAST_ONCE);

    KafkaSource<Tuple2<String, String>> source =
        KafkaSource.<Tuple2<String, String>>builder()
            .setBootstrapServers(settings.bootstrapServers())
            .setTopics(settings.inputTopic())
            .setGroupId(settings.groupId())
            // a first start (no checkpoint to restore) begins where the group committed
            .setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
            .setDeserializer(new KeyValue())
            .setProperty("isolation.level", "read_committed")
            .setProperty("client.id.prefix", "eoschaos-flink-source")
            .build();

    DeliveryGuarantee guarantee =
        settings.exactlyOnce() ? DeliveryGuarantee.EXACTLY_ONCE : DeliveryGuarantee.AT_LEAST_ONCE;
    Properties producer = new Properties();
    producer.setProperty("transaction.timeout.ms", Long.toString(settings.transactionTimeoutMs()));
    producer.setProperty("request.timeout.ms", "10000");
    KafkaSink<Tuple3<String, String, String>> sink =
        KafkaSink.<Tuple3<String, String, String>>builder()
            .setBootstrapServers(settings.bootstrapServers())
            .setDeliveryGuarantee(guarantee)
            .setTransactionalIdPrefix(settings.transactionalIdPrefix())
            .setKafkaProducerConfig(producer)
            .setRecordSerializer(new ToTopic())
            .build();

    int buckets = settings.buckets(); // the key selector is serialized: it captures an int only
    env.fromSource(source, WatermarkStrategy.noWatermarks(), "input")
        .uid("input")
        .keyBy(record -> Long.toString(Math.floorMod(Long.parseLong(record.f0), buckets)))
        .process(new EchoAndAggregate(settings.outputTopic(), settings.aggregateTopic()))
        .uid("echo-and-aggregate")
        .sinkTo(sink)
        .uid("output");
    env.execute("eoschaos-flink " + (settings.exactlyOnce() ? "eos" : "alos"));
  }

  /** An input record as (key, value) strings; the key is the record's id. */
  static final class KeyValue
      implements KafkaRecordDeserializationSchema<Tuple2<String, String>> {
    private static final long serialVersionUID = 1L;

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Tuple2<String, String>> out) {
      out.collect(Tuple2.of(text(record.key()), text(record.value())));
    }

    @Override
    public TypeInformation<Tuple2<String, String>> getProducedType() {
      return TypeInformation.of(new TypeHint<Tuple2<String, String>>() {});
    }

    private static String text(byte[] bytes) {
      return bytes == null ? "" : new String(bytes, StandardCharsets.UTF_8);
    }
  }

  /**
   * Per bucket: the record itself, to the output topic, and the bucket's stats after it, to the
   * aggregate topic (the Streams app's JSON, so the same aggregate check reads both).
   */
  static final class EchoAndAggregate
      extends KeyedProcessFunction<String, Tuple2<String, String>, Tuple3<String, String, String>> {
    private static final long serialVersionUID = 1L;
    private final String outputTopic;
    private final String aggregateTopic;
    private transient ValueState<Tuple4<Long, Long, Long, Long>> stats;

    EchoAndAggregate(String outputTopic, String aggregateTopic) {
      this.outputTopic = outputTopic;
      this.aggregateTopic = aggregateTopic;
    }

    @Override
    public void open(OpenContext context) {
      stats =
          getRuntimeContext()
              .getState(
                  new ValueStateDescriptor<>(
                      "bucket-stats",
                      TypeInformation.of(new TypeHint<Tuple4<Long, Long, Long, Long>>() {})));
    }

    @Override
    public void processElement(
        Tuple2<String, String> record,
        Context context,
        Collector<Tuple3<String, String, String>> out)
        throws Exception {
      long id = Long.parseLong(record.f0);
      Tuple4<Long, Long, Long, Long> now = stats.value();
      now =
          now == null
              ? Tuple4.of(1L, id, id, id)
              : Tuple4.of(now.f0 + 1, now.f1 + id, Math.min(now.f2, id), Math.max(now.f3, id));
      stats.update(now);
      out.collect(Tuple3.of(outputTopic, record.f0, record.f1));
      String json =
          "{\"count\":" + now.f0 + ",\"sum\":" + now.f1 + ",\"min\":" + now.f2 + ",\"max\":"
              + now.f3 + "}";
      out.collect(Tuple3.of(aggregateTopic, context.getCurrentKey(), json));
    }
  }

  /** (topic, key, value) to a producer record of that topic. */
  static final class ToTopic implements KafkaRecordSerializationSchema<Tuple3<String, String, String>> {
    private static final long serialVersionUID = 1L;

    @Override
    public ProducerRecord<byte[], byte[]> serialize(
        Tuple3<String, String, String> element, KafkaSinkContext context, Long timestamp) {
      return new ProducerRecord<>(
          element.f0,
          element.f1.getBytes(StandardCharsets.UTF_8),
          element.f2.getBytes(StandardCharsets.UTF_8));
    }
  }
}
