package producer

import (
	"hash/crc32"
	"math/rand/v2"

	"github.com/IBM/sarama"
)

// PartitionForKey returns the partition a non-empty key is written to when
// the topic has partitions partitions: CRC-32 (IEEE, the reflected 0x04C11DB7
// polynomial) of the key bytes, taken as unsigned, modulo the count. This is
// librdkafka's "consistent" partitioner, which the original producer uses, so
// a fleet mixing both implementations keeps every key on one partition.
//
// partitions must be positive. An empty key has no fixed partition; see
// NewPartitioner.
func PartitionForKey(key []byte, partitions int32) int32 {
	return int32(crc32.ChecksumIEEE(key) % uint32(partitions))
}

// NewPartitioner is a sarama.PartitionerConstructor reproducing librdkafka's
// default "consistent_random" partitioner: PartitionForKey for a non-empty
// key and a random partition for a null or empty key.
//
// sarama.NewConsistentCRCHashPartitioner agrees for non-empty keys but sends
// an empty, non-null key to partition 0 (the CRC-32 of nothing is 0) instead
// of a random one, hence this small replacement.
func NewPartitioner(string) sarama.Partitioner { return partitioner{} }

type partitioner struct{}

var _ sarama.DynamicConsistencyPartitioner = partitioner{}

// Partition implements sarama.Partitioner.
func (partitioner) Partition(msg *sarama.ProducerMessage, partitions int32) (int32, error) {
	key, err := keyBytes(msg)
	if err != nil {
		return -1, err
	}
	if len(key) == 0 {
		// sarama passes only the writable partitions here (see
		// MessageRequiresConsistency), like librdkafka's random
		// partitioner prefers available ones.
		return rand.Int32N(partitions), nil
	}
	return PartitionForKey(key, partitions), nil
}

// RequiresConsistency implements sarama.Partitioner: keyed records must be
// allowed to pick from every partition, reachable or not.
func (partitioner) RequiresConsistency() bool { return true }

// MessageRequiresConsistency implements sarama.DynamicConsistencyPartitioner:
// only records with a non-empty key are pinned to a partition.
func (partitioner) MessageRequiresConsistency(msg *sarama.ProducerMessage) bool {
	return msg.Key != nil && msg.Key.Length() > 0
}

// keyBytes returns the encoded key, avoiding a copy for the string keys Send
// produces.
func keyBytes(msg *sarama.ProducerMessage) ([]byte, error) {
	switch k := msg.Key.(type) {
	case nil:
		return nil, nil
	case sarama.ByteEncoder:
		return k, nil
	default:
		return k.Encode()
	}
}
