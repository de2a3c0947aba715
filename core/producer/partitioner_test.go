package producer

import (
	"testing"

	"github.com/IBM/sarama"
)

// The expected partitions were computed outside Go (Python's zlib.crc32,
// the same IEEE CRC-32) so the test does not just restate the code.
func TestPartitionForKey(t *testing.T) {
	tests := []struct {
		key  string
		crc  uint32
		want map[int32]int32 // partition count -> partition
	}{
		{"a", 0xe8b7be43, map[int32]int32{1: 0, 3: 0, 7: 4, 8: 3, 12: 3, 100: 7}},
		{"abc", 0x352441c2, map[int32]int32{1: 0, 3: 0, 7: 5, 8: 2, 12: 6, 100: 78}},
		{"hello", 0x3610a686, map[int32]int32{3: 1, 7: 2, 8: 6, 12: 10, 100: 70}},
		{"user-42", 0x7d06b873, map[int32]int32{3: 1, 7: 1, 8: 3, 12: 7, 100: 35}},
		{"123456789", 0xcbf43926, map[int32]int32{3: 2, 7: 5, 8: 6, 12: 2, 100: 62}},
		{"\u00e9t\u00e9", 0x44d16cd4, map[int32]int32{3: 0, 7: 3, 8: 4, 12: 0, 100: 72}},
		{"\xff\x00\x01", 0x36dedd69, map[int32]int32{3: 2, 7: 3, 8: 1, 12: 5, 100: 37}},
		// The top bit is set for "a" and "123456789": a signed modulo
		// (sarama's default hash partitioner) would disagree.
		{"The quick brown fox jumps over the lazy dog", 0x414fa339, map[int32]int32{3: 1, 7: 1, 8: 1, 12: 1, 100: 69, 2147483647: 1095738169}},
	}
	for _, tt := range tests {
		for n, want := range tt.want {
			if got := PartitionForKey([]byte(tt.key), n); got != want {
				t.Errorf("PartitionForKey(%q, %d) = %d, want %d (crc %#x)", tt.key, n, got, want, tt.crc)
			}
			msg := &sarama.ProducerMessage{Key: sarama.ByteEncoder(tt.key)}
			if got, err := NewPartitioner("t").Partition(msg, n); err != nil || got != want {
				t.Errorf("Partition(%q, %d) = %d, %v; want %d", tt.key, n, got, err, want)
			}
		}
	}
}

// Empty and null keys go to a random partition, and sarama may then choose
// among the writable partitions only.
func TestPartitionerEmptyKeyIsRandom(t *testing.T) {
	tests := []struct {
		name string
		key  sarama.Encoder
	}{
		{"null", nil},
		{"empty bytes", sarama.ByteEncoder([]byte(""))},
		{"empty string", sarama.StringEncoder("")},
	}
	const partitions = 8
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPartitioner("t").(sarama.DynamicConsistencyPartitioner)
			msg := &sarama.ProducerMessage{Key: tt.key}
			if p.MessageRequiresConsistency(msg) {
				t.Error("MessageRequiresConsistency = true for an empty key")
			}
			seen := map[int32]bool{}
			// 500 draws from 8 partitions all landing on one has
			// probability 8^-499: not a flaky test.
			for range 500 {
				got, err := p.Partition(msg, partitions)
				if err != nil || got < 0 || got >= partitions {
					t.Fatalf("Partition = %d, %v", got, err)
				}
				seen[got] = true
			}
			if len(seen) < 2 {
				t.Errorf("500 sends went to partitions %v, want a spread", seen)
			}
		})
	}
}

// Documents why we do not use sarama.NewConsistentCRCHashPartitioner: it
// agrees on non-empty keys but pins an empty key to partition 0.
func TestSaramaConsistentCRCDiffersOnlyOnEmptyKey(t *testing.T) {
	sp := sarama.NewConsistentCRCHashPartitioner("t")
	for _, key := range []string{"a", "abc", "user-42", "123456789"} {
		msg := &sarama.ProducerMessage{Key: sarama.StringEncoder(key)}
		got, _ := sp.Partition(msg, 7)
		if want := PartitionForKey([]byte(key), 7); got != want {
			t.Errorf("sarama partition of %q = %d, ours %d", key, got, want)
		}
	}
	empty := &sarama.ProducerMessage{Key: sarama.StringEncoder("")}
	for range 20 {
		if got, _ := sp.Partition(empty, 7); got != 0 {
			t.Fatalf("sarama now sends an empty key to %d; revisit NewPartitioner", got)
		}
	}
}

func TestPartitionerMatchesMessageConsistency(t *testing.T) {
	p := NewPartitioner("t").(sarama.DynamicConsistencyPartitioner)
	if !p.RequiresConsistency() {
		t.Error("RequiresConsistency = false")
	}
	if !p.MessageRequiresConsistency(&sarama.ProducerMessage{Key: sarama.ByteEncoder("k")}) {
		t.Error("MessageRequiresConsistency = false for a keyed record")
	}
}
