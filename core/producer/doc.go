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
package producer
