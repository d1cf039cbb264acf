package eoschaos.streams;

import java.util.Map;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.rocksdb.Options;

/**
 * Sets the RocksDB memtable size of every store to {@link #CONFIG} bytes (RocksDB clips it to at
 * least 64 KiB). Streams writes its stores' memtables to disk only when a checkpoint is due or a
 * memtable is full; small memtables fill within one transaction, so a kill leaves writes of a
 * transaction that is then aborted in the store's files (KAFKA-20685, docs/findings.md).
 */
public final class WriteBufferSize implements RocksDBConfigSetter {
  static final String CONFIG = "eoschaos.rocksdb.write.buffer.bytes";

  @Override
  public void setConfig(String storeName, Options options, Map<String, Object> configs) {
    options.setWriteBufferSize(Long.parseLong(String.valueOf(configs.get(CONFIG))));
  }

  @Override
  public void close(String storeName, Options options) {}
}
