package fetch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// A fetch asks for partitions until what they are expected to decode to
// reaches the response budget (and for one at least). Those left out come
// first in the next fetch, and while any left out had records waiting the
// broker may not hold the fetch, since those asked may have none.
func TestRequestBudget(t *testing.T) {
	f := &Fetcher{opts: Options{MaxWait: 500 * time.Millisecond}}
	f.opts.defaults()
	b := &brokerLoop{f: f, wakeup: make(chan struct{}, 1)}
	stream := func(p int32, expect int) *Stream {
		s := NewStream("t", p, 0, 100)
		if expect >= 0 {
			s.expect, s.behind, s.fetched = expect, true, true
		}
		b.streams = append(b.streams, s)
		return s
	}
	asked := func() ([]int32, int32) {
		t.Helper()
		req, ask, ok := b.request(nil)
		if !ok || req == nil {
			t.Fatalf("no fetch (ended %v)", !ok)
		}
		var ps []int32
		for _, a := range ask {
			ps = append(ps, a.s.partition)
		}
		return ps, req.MaxWaitTime
	}

	// Eight partitions of uncompressed records fit in one fetch.
	for p := range int32(8) {
		stream(p, 3<<19) // 1.5 MiB: 1 MiB of records and their structs
	}
	if ps, wait := asked(); len(ps) != 8 || wait != 500 {
		t.Fatalf("asked for %v with max wait %d ms, want all 8 and 500", ps, wait)
	}

	// Partitions expected to bring 6 MiB each: two per fetch, in turn.
	b.streams, b.turn = nil, 0
	for p := range int32(5) {
		stream(p, 6<<20)
	}
	var seen []int32
	for i := range 3 {
		ps, wait := asked()
		if len(ps) != 2 {
			t.Fatalf("fetch %d asked for %v, want two partitions", i, ps)
		}
		if wait != 0 {
			t.Fatalf("fetch %d: max wait %d ms with partitions left out, want 0", i, wait)
		}
		seen = append(seen, ps...)
	}
	slices.Sort(seen)
	seen = slices.Compact(seen)
	if fmt.Sprint(seen) != "[0 1 2 3 4]" {
		t.Fatalf("three fetches asked for %v, want every partition", seen)
	}

	// Partitions left out whose last blocks reached the log's end: the
	// broker may hold the fetch (else caught-up partitions would be
	// fetched in a loop that never waits).
	for _, s := range b.streams {
		s.behind = false
	}
	if ps, wait := asked(); len(ps) != 2 || wait != 500 {
		t.Fatalf("asked for %v with max wait %d ms, want two partitions and 500", ps, wait)
	}

	// One partition alone over the budget is still fetched.
	b.streams, b.turn = nil, 0
	stream(0, 64<<20)
	if ps, wait := asked(); len(ps) != 1 || wait != 500 {
		t.Fatalf("asked for %v with max wait %d ms, want the one partition and 500", ps, wait)
	}

	// Unknown partitions (never fetched) are expected to expand a lot,
	// but at the first fetch's size all eight fit.
	b.streams, b.turn = nil, 0
	for p := range int32(8) {
		s := stream(p, -1)
		s.size = firstPartitionBytes
	}
	if ps, _ := asked(); len(ps) != 8 {
		t.Fatalf("asked for %v, want all 8 new partitions", ps)
	}
}

// deliver queues a block in chunks of its own memory, leaves nothing of
// the response in the loop's scratch or in the response itself, and sizes
// the partition's next fetch from the block.
func TestDeliver(t *testing.T) {
	f := &Fetcher{opts: Options{}}
	f.opts.defaults()
	b := &brokerLoop{f: f, wakeup: make(chan struct{}, 1)}
	value := func(i int) string { return fmt.Sprintf("%06d:%s", i, strings.Repeat("v", 200)) }

	resp := &sarama.FetchResponse{Version: 12}
	const n = 3000
	for i := range n {
		resp.AddRecord("t", 0, nil, sarama.StringEncoder(value(i)), int64(i))
	}
	resp.Blocks["t"][0].HighWaterMarkOffset = n + 500 // records past the block
	s := NewStream("t", 0, 0, 1<<20)
	s.size = 64 << 10
	b.deliver(resp, asked{s: s, at: fetchAt{offset: 0, size: 64 << 10}})

	if resp.GetBlock("t", 0) != nil {
		t.Fatal("the delivered block is still in the response")
	}
	if len(b.scratch) != 0 || cap(b.scratch) < n || slices.ContainsFunc(b.scratch[:cap(b.scratch)], func(r Record) bool { return r.Value != nil }) {
		t.Fatal("the scratch keeps records of the response")
	}
	s.mu.Lock()
	chunks := len(s.batches)
	s.mu.Unlock()
	if want := n * (len(value(0)) + recordSize) / chunkBytes; chunks < want {
		t.Fatalf("%d chunks queued, want %d or more", chunks, want)
	}
	for i := 0; i < n; {
		rs := s.Peek(n)
		for _, r := range rs {
			if r.Offset != int64(i) || string(r.Value) != value(i) {
				t.Fatalf("record %d: offset %d value %.10q", i, r.Offset, r.Value)
			}
			i++
		}
		s.Take(len(rs))
	}
	// ~950 KiB decoded from 64 KiB asked, with records waiting: the next
	// fetch asks for more, twice as much at most.
	if at, _, _ := s.wanted(); at.offset != n || at.size != 128<<10 || !at.behind {
		t.Fatalf("next fetch at %d for %d bytes (behind %v), want %d, 128 KiB, behind", at.offset, at.size, at.behind, n)
	}

	// The same at the log's end: the size stays.
	resp = &sarama.FetchResponse{Version: 12}
	for i := n; i < 2*n; i++ {
		resp.AddRecord("t", 0, nil, sarama.StringEncoder(value(i)), int64(i))
	}
	resp.Blocks["t"][0].HighWaterMarkOffset = 2 * n
	b.deliver(resp, asked{s: s, at: fetchAt{offset: n, size: 128 << 10}})
	if at, _, _ := s.wanted(); at.offset != 2*n || at.size != 128<<10 || at.behind {
		t.Fatalf("next fetch at %d for %d bytes (behind %v), want %d, 128 KiB, not behind", at.offset, at.size, at.behind, 2*n)
	}
	s.Take(s.Queued())

	// Only a transaction marker: the offset moves on, and the size stays.
	resp = &sarama.FetchResponse{Version: 12}
	resp.AddControlRecord("t", 0, 2*n, 7, sarama.ControlRecordCommit)
	resp.Blocks["t"][0].HighWaterMarkOffset = 2*n + 10
	b.deliver(resp, asked{s: s, at: fetchAt{offset: 2 * n, size: 128 << 10}})
	if at, _, _ := s.wanted(); at.offset != 2*n+1 || at.size != 128<<10 {
		t.Fatalf("next fetch at %d for %d bytes, want %d for 128 KiB", at.offset, at.size, 2*n+1)
	}
	const n2 = 2*n + 1

	// No record, yet records past the offset: the first batch is larger
	// than asked, and the next fetch asks for twice as much.
	resp = &sarama.FetchResponse{Version: 12, Blocks: map[string]map[int32]*sarama.FetchResponseBlock{
		"t": {0: {HighWaterMarkOffset: n2 + 500}}}}
	b.deliver(resp, asked{s: s, at: fetchAt{offset: n2, size: 128 << 10}})
	if at, _, _ := s.wanted(); at.offset != n2 || at.size != 256<<10 || !at.behind {
		t.Fatalf("next fetch at %d for %d bytes (behind %v), want %d for 256 KiB, behind", at.offset, at.size, at.behind, n2)
	}
}
