// Package producer is Prosody's Kafka producer (core-behavior.md §6).
//
// One Producer owns one sarama AsyncProducer that every Send shares. Send is
// synchronous for its caller: it hands the record to sarama and waits for
// that record's own delivery report, so many goroutines can send at once
// while sarama batches their records per partition.
//
// Things another process can observe, and which therefore match the original
// implementation exactly:
//
//   - the partitioner: CRC-32 (IEEE) of the key bytes modulo the partition
//     count, a random partition for an empty key (see NewPartitioner);
//   - the source-system header, written first on every record;
//   - idempotent, LZ4-compressed produce requests acknowledged by all
//     in-sync replicas.
//
// What this package adds on top of the original: the send timeout bounds the
// whole Send, up to the delivery report (core-behavior.md §1 (i)).
//
// # Guarantees
//
//   - Idempotent: sarama's idempotent producer with acks from all in-sync
//     replicas and one request in flight per broker, so its internal retries
//     neither duplicate nor reorder records within a producer's lifetime. A
//     caller's retry after an error or timeout can still write a record twice
//     (at least once), so handlers must tolerate a record twice; the
//     consumer's deduplication by event id is specified and not built yet.
//   - Ordering per key: a key always maps to the same partition, so records
//     of one key sent one after the other (each Send returned before the next
//     started) are stored in that order. Concurrent sends have no order
//     between them.
//   - Id cache: when Options.IdempotenceCacheSize > 0, the producer remembers
//     the (topic, key, id) of each delivered record whose payload has a
//     top-level string "id", in a bounded LRU local to this Producer. A later
//     send of the same triple is skipped (Delivery.Skipped) without writing.
//     Only delivered sends are remembered, so a failed send can be retried;
//     sends racing with the first one are not deduplicated; other "id" values
//     (numbers, null, nested) are ignored.
//   - Send timeout: Options.SendTimeout bounds each Send from the call to the
//     delivery report, including waiting for the connection. On expiry Send
//     returns an error wrapping ErrSendTimeout, which is transient; the record
//     may still be delivered afterwards.
//   - Validation: Send accepts only a payload that is exactly one JSON
//     document and fails at once, with a permanent error, otherwise.
//
// Every error from New, Send and Close classifies through fault.ClassOf
// (permanent, transient or terminal); Kafka error codes follow the
// original's table.
package producer
