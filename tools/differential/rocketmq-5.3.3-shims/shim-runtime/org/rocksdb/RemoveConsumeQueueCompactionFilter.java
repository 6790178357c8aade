package org.rocksdb;

/**
 * Local shim. RocketMQ 5.3.3 builds against io.github.aliyunmq:rocketmq-rocksdb 1.0.2, a RocksDB fork
 * whose native library has a RemoveConsumeQueueCompactionFilter (drops CQ entries whose physical offset
 * is below minPhyOffset during compaction). Stock rocksdbjni 9.8.4 has no such native filter, so this
 * shim reuses the stock RemoveEmptyValueCompactionFilter: consume-queue values are never empty, so
 * compaction keeps every entry (no compaction-time cleanup of expired CQ entries).
 */
public class RemoveConsumeQueueCompactionFilter extends RemoveEmptyValueCompactionFilter {
    private final long minPhyOffset;

    public RemoveConsumeQueueCompactionFilter(final long minPhyOffset) {
        super();
        this.minPhyOffset = minPhyOffset;
    }

    public long getMinPhyOffset() {
        return minPhyOffset;
    }
}
