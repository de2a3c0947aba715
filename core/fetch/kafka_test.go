package fetch

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// Against the real broker, with a fetch size far below the records' batch
// size: the broker returns a batch larger than that only for the first
// partition of a response that has records, and nothing for the others
// (fetch versions 3 and later; earlier ones cut them short, which
// TestRecords covers). Every record of both partitions must still arrive,
// in order: a partition left empty asks for twice as much next time.
func TestFetchFromKafka(t *testing.T) {
	addrs, cfg, name := kafkaTopic(t, "fetch", 2)
	cfg.Producer.Flush.Messages = 20 // a send's records in one batch per partition
	cfg.Producer.Flush.Frequency = time.Second

	const n = 50
	value := func(p, i int) []byte {
		return append(fmt.Appendf(nil, "%d-%d:", p, i), bytes.Repeat([]byte{'x'}, 3000)...)
	}
	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// In five sends, so that each partition has several batches: while
	// both have records left, every fetch finds both with data.
	for round := range 5 {
		var msgs []*sarama.ProducerMessage
		for i := round * n / 5; i < (round+1)*n/5; i++ {
			for p := range 2 {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: name, Partition: int32(p), Value: sarama.ByteEncoder(value(p, i))})
			}
		}
		testservices.WaitFor(t, 30*time.Second, "the topic to take records", func() bool { return producer.SendMessages(msgs) == nil })
	}
	producer.Close()

	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := New(client, Options{PartitionBytes: 1024, MaxWait: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer f.Close()
	// Both partitions in every fetch: one of them comes second.
	streams := []*Stream{
		f.Subscribe(name, 0, sarama.OffsetOldest, 1000),
		f.Subscribe(name, 1, sarama.OffsetOldest, 1000),
	}
	for p, s := range streams {
		defer s.Close()
		readInOrder(t, s, p, 0, n, value)
	}
}

// readInOrder takes records from..to-1 of partition p from s, failing
// unless each is at its offset with the value value(p, offset).
func readInOrder(t *testing.T, s *Stream, p, from, to int, value func(p, i int) []byte) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for got := from; got < to; {
		rs := s.Peek(to - got)
		if len(rs) == 0 {
			select {
			case <-s.Ready():
			case <-deadline:
				t.Fatalf("partition %d: read %d of %d records", p, got, to)
			}
			continue
		}
		for _, r := range rs {
			if r.Offset != int64(got) || !bytes.Equal(r.Value, value(p, got)) {
				t.Fatalf("partition %d: record %d at offset %d, value %.20q", p, got, r.Offset, r.Value)
			}
			got++
		}
		s.Take(len(rs))
	}
}

// A topic of LZ4 batches that decode to ten times their size or more,
// read from four partitions: after the first fetches a partition is asked
// for what decodes to about twice the partition fetch size (at the full
// size, a block held ~11 MiB of records here), without falling below a
// batch; a partition that caught up keeps its size, so a backlog that
// builds up afterwards is fetched the same way; and every record arrives,
// in order.
func TestFetchCompressedFromKafka(t *testing.T) {
	const partitions = 4
	addrs, cfg, name := kafkaTopic(t, "fetch-lz4", partitions)
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.Flush.Bytes = 1 << 20
	cfg.Producer.Flush.Frequency = 100 * time.Millisecond

	value := func(p, i int) []byte {
		return fmt.Appendf(nil, `{"id":"evt-%d-%09d","type":"test.event","seq":%d,"pad":"%s"}`, p, i, i, bytes.Repeat([]byte{'x'}, 400))
	}
	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produced := make([]int, partitions)
	produce := func(count int) { // to every partition
		for p := range partitions {
			for end := produced[p] + count; produced[p] < end; {
				var msgs []*sarama.ProducerMessage
				for i := produced[p]; i < min(end, produced[p]+10_000); i++ {
					msgs = append(msgs, &sarama.ProducerMessage{Topic: name, Partition: int32(p), Value: sarama.ByteEncoder(value(p, i))})
				}
				testservices.WaitFor(t, 30*time.Second, "the topic to take records", func() bool { return producer.SendMessages(msgs) == nil })
				produced[p] += len(msgs)
			}
		}
	}

	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var blocks, largest int // Fetched runs on the one fetch loop
	f := New(client, Options{MaxWait: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Fetched: func(_ string, _ int32, rs []Record) {
			decoded := 0
			for i := range rs {
				decoded += recordBytes(&rs[i]) + recordSize
			}
			blocks++
			largest = max(largest, decoded)
		}})
	defer f.Close()
	// A stream limit of a fast reader's (a slow one's makes blocks
	// smaller still: TestStreamResize).
	const streamLimit = 20_000
	var streams []*Stream
	for p := range partitions {
		s := f.Subscribe(name, int32(p), sarama.OffsetOldest, streamLimit)
		defer s.Close()
		streams = append(streams, s)
	}
	read := make([]int, partitions)
	readUpTo := func(p, n int) {
		readInOrder(t, streams[p], p, read[p], n, value)
		read[p] = n
	}
	sizes := func() []int32 {
		var out []int32
		for _, s := range streams {
			s.mu.Lock()
			out = append(out, s.size)
			s.mu.Unlock()
		}
		return out
	}

	// A backlog, read to its end, then a few records at the log's end.
	produce(15_000)
	for p := range partitions {
		readUpTo(p, produced[p])
	}
	backlogSizes := sizes()
	for range 3 {
		produce(1)
		for p := range partitions {
			readUpTo(p, produced[p])
		}
	}
	if got := sizes(); fmt.Sprint(got) != fmt.Sprint(backlogSizes) {
		t.Errorf("caught-up partitions are fetched %v bytes at a time, want %v as during the backlog", got, backlogSizes)
	}
	// A second backlog builds up while every stream is full (one record
	// queued, limit 1), then is read.
	produce(1)
	for _, s := range streams {
		testservices.WaitFor(t, 30*time.Second, "a record queued", func() bool { return s.Queued() == 1 })
		s.SetLimit(1)
	}
	produce(15_000)
	for p, s := range streams {
		s.SetLimit(streamLimit)
		readUpTo(p, produced[p])
	}
	f.Close() // Fetched is not called any more
	for p, size := range sizes() {
		// A batch here is ~1 MiB of records on the wire in ~100 KiB:
		// fetches never ask for less than one, nor for the full size.
		if size < 32<<10 || size >= defaultPartitionBytes/2 {
			t.Errorf("partition %d is fetched %d bytes at a time, want between 32 KiB and %d", p, size, defaultPartitionBytes/2)
		}
	}
	// A block decodes to about twice the partition fetch size, give or
	// take a batch: producer batches here are ~1.2 MB decoded (sarama's
	// MaxMessageBytes is 1 MiB of records), and a block holds whole ones.
	if limit := 5 << 20; largest > limit {
		t.Errorf("the largest of %d blocks decoded to %d bytes, want at most %d", blocks, largest, limit)
	}
	t.Logf("%d blocks, the largest %d bytes decoded; sizes %v", blocks, largest, sizes())
}

// kafkaTopic creates a topic of the given partitions on the test broker,
// deleted when the test ends, and returns the broker's addresses, a
// configuration whose producer sends to partitions chosen by hand and
// waits for acknowledgements, and the topic's name.
func kafkaTopic(t *testing.T, prefix string, partitions int32) ([]string, *sarama.Config, string) {
	t.Helper()
	addrs := testservices.RequireKafka(t)
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	name := testservices.UniqueName(prefix)
	admin, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.DeleteTopic(name)
		_ = admin.Close()
	})
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	return addrs, cfg, name
}
