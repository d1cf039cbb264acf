package eoschaos.streams;

import java.nio.ByteBuffer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;

/**
 * The running aggregate of one bucket: how many ids it saw and their sum, min and max.
 *
 * <p>Count and sum reveal a lost or double-counted input; min and max pin down which end. Stored as
 * four fixed-width longs (no JSON library on the classpath); published as JSON text.
 */
record BucketStats(long count, long sum, long min, long max) {

  private static final int BYTES = 4 * Long.BYTES;

  static final Serde<BucketStats> SERDE =
      Serdes.serdeFrom(serializer(), deserializer());

  static BucketStats empty() {
    return new BucketStats(0, 0, Long.MAX_VALUE, Long.MIN_VALUE);
  }

  BucketStats add(long id) {
    return new BucketStats(count + 1, sum + id, Math.min(min, id), Math.max(max, id));
  }

  String toJson() {
    return "{\"count\":" + count + ",\"sum\":" + sum + ",\"min\":" + min + ",\"max\":" + max + "}";
  }

  private static Serializer<BucketStats> serializer() {
    return (topic, stats) -> {
      if (stats == null) {
        return null;
      }
      return ByteBuffer.allocate(BYTES)
          .putLong(stats.count)
          .putLong(stats.sum)
          .putLong(stats.min)
          .putLong(stats.max)
          .array();
    };
  }

  private static Deserializer<BucketStats> deserializer() {
    return (topic, bytes) -> {
      if (bytes == null) {
        return null;
      }
      ByteBuffer buffer = ByteBuffer.wrap(bytes);
      return new BucketStats(
          buffer.getLong(), buffer.getLong(), buffer.getLong(), buffer.getLong());
    };
  }
}
