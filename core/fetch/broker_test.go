package fetch

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A fetch asks for partitions until what they are expected to decode to
// reaches the response budget (and for one at least). Those left out come
// first in the next fetch, and while any are left out the broker may not
// hold the fetch, since they may have records when those asked have none.
func TestRequestBudget(t *testing.T) {
	f := &Fetcher{opts: Options{MaxWait: 500 * time.Millisecond}}
	f.opts.defaults()
	b := &brokerLoop{f: f, wakeup: make(chan struct{}, 1)}
	stream := func(p int32, expect int) *Stream {
		s := NewStream("t", p, 0, 100)
		if expect >= 0 {
			s.expect, s.fetched = expect, true
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
