package fetch

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

const topic = "t"

func testConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_7_0_0
	// The mock brokers answer only what each test sets up.
	cfg.ApiVersionsRequest = false
	cfg.Metadata.Retry.Backoff = 10 * time.Millisecond
	return cfg
}

func metadata(t *testing.T, leader *sarama.MockBroker, all ...*sarama.MockBroker) *sarama.MockMetadataResponse {
	m := sarama.NewMockMetadataResponse(t)
	for _, b := range all {
		m.SetBroker(b.Addr(), b.BrokerID())
	}
	return m.SetLeader(topic, 0, leader.BrokerID()).SetController(all[0].BrokerID())
}

// fetchResponse holds records at the given offsets of partition 0, or the
// error.
func fetchResponse(kerr sarama.KError, offsets ...int64) *sarama.FetchResponse {
	r := &sarama.FetchResponse{Version: 12}
	if kerr != sarama.ErrNoError {
		r.AddError(topic, 0, kerr)
		return r
	}
	for _, o := range offsets {
		r.AddRecord(topic, 0, nil, sarama.StringEncoder("v"), o)
	}
	if len(offsets) == 0 {
		r.AddError(topic, 0, sarama.ErrNoError)
	}
	return r
}

// mockBroker starts a mock broker that answers after a millisecond (a
// fetch loop would otherwise spin on empty answers) and stops with the
// test, after the fetcher.
func mockBroker(t *testing.T, id int32) *sarama.MockBroker {
	b := sarama.NewMockBroker(t, id)
	t.Cleanup(b.Close)
	b.SetLatency(time.Millisecond)
	return b
}

func newTestFetcher(t *testing.T, seed *sarama.MockBroker) *Fetcher {
	t.Helper()
	client, err := sarama.NewClient([]string{seed.Addr()}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	f := New(client, Options{MaxWait: 10 * time.Millisecond, RetryBackoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// read takes records from s until it has n or a few seconds have passed.
func read(t *testing.T, s *Stream, n int) []int64 {
	t.Helper()
	var got []int64
	deadline := time.After(5 * time.Second)
	for len(got) < n {
		rs := s.Peek(n)
		if len(rs) == 0 {
			select {
			case <-s.Ready():
			case <-deadline:
				t.Fatalf("read %v, want %d records", got, n)
			}
			continue
		}
		got = append(got, offsets(rs)...)
		s.Take(len(rs))
	}
	return got
}

func expect(t *testing.T, got []int64, want ...int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("offsets %v, want %v", got, want)
		}
	}
}

func TestFetcher(t *testing.T) {
	t.Run("the oldest offset is resolved and records arrive in order", testFetchFromOldest)
	t.Run("an offset out of range moves to the log's start", testFetchOutOfRange)
	t.Run("a moved leader is found again", testFetchLeaderMoved)
	t.Run("a broker that goes away: its partitions move to the new leader", testFetchBrokerGone)
	t.Run("an offset back in range by the time it is resolved is kept", testFetchBackInRange)
	t.Run("batches with no records left are skipped, not fetched forever", testFetchEmptyBatches)
	t.Run("a new connection to a broker takes over its idle loop's partitions", testFetchNewConnection)
}

func testFetchFromOldest(t *testing.T) {
	b := mockBroker(t, 1)
	b.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": metadata(t, b, b),
		"OffsetRequest":   sarama.NewMockOffsetResponse(t).SetOffset(topic, 0, sarama.OffsetOldest, 5),
		"FetchRequest": sarama.NewMockSequence(
			fetchResponse(sarama.ErrNoError, 5, 6, 7),
			fetchResponse(sarama.ErrNoError, 8, 9),
			fetchResponse(sarama.ErrNoError)),
	})
	s := newTestFetcher(t, b).Subscribe(topic, 0, sarama.OffsetOldest, 100)
	defer s.Close()
	expect(t, read(t, s, 5), 5, 6, 7, 8, 9)
}

// outOfRangeBroker serves offsets 0-2 of partition 0, then says the next
// offset is out of range of a log from oldest to newest, then answers with
// then (the last answer repeating).
func outOfRangeBroker(t *testing.T, oldest, newest int64, then ...any) *sarama.MockBroker {
	b := mockBroker(t, 1)
	b.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": metadata(t, b, b),
		"OffsetRequest": sarama.NewMockOffsetResponse(t).
			SetOffset(topic, 0, sarama.OffsetOldest, oldest).SetOffset(topic, 0, sarama.OffsetNewest, newest),
		"FetchRequest": sarama.NewMockSequence(append([]any{
			fetchResponse(sarama.ErrNoError, 0, 1, 2),
			fetchResponse(sarama.ErrOffsetOutOfRange),
		}, then...)...),
	})
	return b
}

func testFetchOutOfRange(t *testing.T) {
	b := outOfRangeBroker(t, 10, 20, fetchResponse(sarama.ErrNoError, 10, 11), fetchResponse(sarama.ErrNoError))
	s := newTestFetcher(t, b).Subscribe(topic, 0, 0, 100)
	defer s.Close()
	expect(t, read(t, s, 5), 0, 1, 2, 10, 11)
}

func testFetchLeaderMoved(t *testing.T) {
	b1, b2 := mockBroker(t, 1), mockBroker(t, 2)
	b1.SetHandlerByMap(map[string]sarama.MockResponse{
		// The client's first metadata says broker 1 leads; once its fetch
		// says it does not, broker 2 does.
		"MetadataRequest": sarama.NewMockSequence(metadata(t, b1, b1, b2), metadata(t, b2, b1, b2)),
		"FetchRequest": sarama.NewMockSequence(
			fetchResponse(sarama.ErrNoError, 0, 1),
			fetchResponse(sarama.ErrNotLeaderForPartition)),
	})
	b2.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": metadata(t, b2, b1, b2),
		"FetchRequest": sarama.NewMockSequence(
			fetchResponse(sarama.ErrNoError, 2, 3),
			fetchResponse(sarama.ErrNoError)),
	})
	s := newTestFetcher(t, b1).Subscribe(topic, 0, 0, 100)
	defer s.Close()
	expect(t, read(t, s, 4), 0, 1, 2, 3)
}

func testFetchBrokerGone(t *testing.T) {
	b1 := sarama.NewMockBroker(t, 1) // closed by the test
	b1.SetLatency(time.Millisecond)
	b2 := mockBroker(t, 2)
	b1.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": metadata(t, b1, b1, b2),
		"FetchRequest":    sarama.NewMockSequence(fetchResponse(sarama.ErrNoError, 0, 1), fetchResponse(sarama.ErrNoError)),
	})
	b2.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": metadata(t, b2, b2),
		"FetchRequest":    sarama.NewMockSequence(fetchResponse(sarama.ErrNoError, 2, 3), fetchResponse(sarama.ErrNoError)),
	})
	s := newTestFetcher(t, b1).Subscribe(topic, 0, 0, 100)
	defer s.Close()
	expect(t, read(t, s, 2), 0, 1)
	b1.Close()
	expect(t, read(t, s, 2), 2, 3)
}

// After the out-of-range answer the broker serves the records from the
// offset asked for (a MockFetchResponse, in the legacy message format): a
// resolved offset moved back to the log's start would read 0-2 again.
func testFetchBackInRange(t *testing.T) {
	log := sarama.NewMockFetchResponse(t, 2)
	for o := int64(0); o < 5; o++ {
		log.SetMessage(topic, 0, o, sarama.StringEncoder("v"))
	}
	log.SetHighWaterMark(topic, 0, 5)
	b := outOfRangeBroker(t, 0, 20, log)
	s := newTestFetcher(t, b).Subscribe(topic, 0, 0, 100)
	defer s.Close()
	expect(t, read(t, s, 5), 0, 1, 2, 3, 4)
}

// Offsets 0-5 are a batch whose records compaction removed, and nothing
// follows yet: the next fetch must start at 6.
func testFetchEmptyBatches(t *testing.T) {
	b := mockBroker(t, 1)
	empty := &sarama.FetchResponse{Version: 12}
	empty.AddRecord(topic, 0, nil, sarama.StringEncoder("v"), 0)
	blk := empty.GetBlock(topic, 0)
	blk.RecordsSet[0].RecordBatch.Records = nil
	blk.RecordsSet[0].RecordBatch.LastOffsetDelta = 5
	blk.HighWaterMarkOffset = 6
	b.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": metadata(t, b, b),
		"FetchRequest":    sarama.NewMockWrapper(empty),
	})
	s := newTestFetcher(t, b).Subscribe(topic, 0, 0, 100)
	defer s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s.position() == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("next fetch from %d, want 6, past the empty batch", s.position())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s.Queued() != 0 {
		t.Fatalf("%d records queued from an empty batch", s.Queued())
	}
}

// The client replaces its connection to broker 1 (as after an error that
// made it drop the broker) while the loop on the old one is idle, its
// stream full; a partition placed on broker 1 then starts a loop on the new
// connection. The idle loop's partition must go on being fetched once it
// has room (the new loop takes it over, and a stream wakes the loop that
// has it, not the loops the fetcher knows of: before both, nothing woke
// the old loop again).
func testFetchNewConnection(t *testing.T) {
	b := mockBroker(t, 1)
	m := sarama.NewMockMetadataResponse(t).SetBroker(b.Addr(), 1).
		SetLeader(topic, 0, 1).SetLeader(topic, 1, 1).SetController(1)
	fr := sarama.NewMockFetchResponse(t, 2)
	for o := int64(0); o < 100; o++ {
		fr.SetMessage(topic, 0, o, sarama.StringEncoder("v"))
	}
	fr.SetHighWaterMark(topic, 0, 100)
	b.SetHandlerByMap(map[string]sarama.MockResponse{"MetadataRequest": m, "FetchRequest": fr})
	f := newTestFetcher(t, b)
	s0 := f.Subscribe(topic, 0, 0, 2)
	defer s0.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s0.Queued() < 2 || s0.Pauses() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream never filled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.client.RefreshBrokers([]string{b.Addr()}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.RefreshMetadata(topic); err != nil {
		t.Fatal(err)
	}
	s1 := f.Subscribe(topic, 1, 0, 2)
	defer s1.Close()
	deadline = time.Now().Add(5 * time.Second)
	for s1.owner.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the new partition never reached a loop")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Taking records makes room in s0: only a loop that has it hears.
	expect(t, read(t, s0, 6), 0, 1, 2, 3, 4, 5)
}
