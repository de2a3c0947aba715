package fetch

import (
	"cmp"
	"testing"
)

func recs(from, n int64) []Record {
	rs := make([]Record, n)
	for i := range rs {
		rs[i].Offset = from + int64(i)
	}
	return rs
}

func TestStream(t *testing.T) {
	t.Run("records come out in order across fetches", testStreamOrder)
	t.Run("a stream at its limit is left out, and asks again once it has room", testStreamLimit)
	t.Run("records fetched from a stale offset are dropped", testStreamStalePush)
	t.Run("a closed stream drops what it holds and takes nothing more", testStreamClose)
}

func testStreamOrder(t *testing.T) {
	s := NewStream("t", 0, 0, 100)
	s.Push(0, recs(0, 5), 5)
	s.Push(5, nil, 7) // a control batch: nothing to read, the offset moves
	s.Push(7, recs(7, 3), 10)
	var got []int64
	for {
		rs := s.Peek(2)
		if len(rs) == 0 {
			break
		}
		for _, r := range rs {
			got = append(got, r.Offset)
		}
		s.Take(len(rs))
	}
	want := []int64{0, 1, 2, 3, 4, 7, 8, 9}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if at, ok, _ := s.wanted(); !ok || at.offset != 10 {
		t.Fatalf("next fetch from %d (%v), want 10", at.offset, ok)
	}
	select {
	case <-s.Ready():
	default:
		t.Fatal("no ready signal after records were pushed")
	}
}

func testStreamLimit(t *testing.T) {
	s := NewStream("t", 0, 0, 10)
	// An owner loop that is not running: its wake-up channel holds a
	// signal until taken.
	owner := &brokerLoop{wakeup: make(chan struct{}, 1)}
	s.owner.Store(owner)
	woken := 0
	wakes := func() int {
		select {
		case <-owner.wakeup:
			woken++
		default:
		}
		return woken
	}
	s.Push(0, recs(0, 12), 12)
	if _, ok, _ := s.wanted(); ok {
		t.Fatal("a stream holding more than its limit is still fetched")
	}
	if _, ok, _ := s.wanted(); ok || s.Pauses() != 1 {
		t.Fatalf("pauses %d after being left out twice in a row, want 1", s.Pauses())
	}
	s.Take(2) // 10 left: still at the limit
	if wakes() != 0 {
		t.Fatal("woke the fetcher with no room")
	}
	s.Take(1)
	if wakes() != 1 {
		t.Fatalf("woke the fetcher %d times once it had room, want 1", woken)
	}
	if at, ok, _ := s.wanted(); !ok || at.offset != 12 {
		t.Fatalf("next fetch from %d (%v), want 12", at.offset, ok)
	}
	s.Push(12, recs(12, 20), 32)
	s.wanted()
	s.SetLimit(100) // a faster partition: more room
	if wakes() != 2 {
		t.Fatalf("raising the limit woke the fetcher %d times in all, want 2", woken)
	}
	if s.Queued() != 29 {
		t.Fatalf("%d queued, want 29", s.Queued())
	}
}

func testStreamStalePush(t *testing.T) {
	s := NewStream("t", 0, 0, 10)
	if !s.seek(0, 50) {
		t.Fatal("seek refused")
	}
	if s.Push(0, recs(0, 3), 3) {
		t.Fatal("records fetched from before the seek were taken")
	}
	if s.Queued() != 0 {
		t.Fatal("stale records queued")
	}
	if s.seek(0, 60) {
		t.Fatal("a seek from a position the stream left was applied")
	}
}

func testStreamClose(t *testing.T) {
	s := NewStream("t", 0, 0, 10)
	s.Push(0, recs(0, 3), 3)
	s.Close()
	if s.Queued() != 0 || len(s.Peek(10)) != 0 {
		t.Fatal("a closed stream still holds records")
	}
	if s.Push(3, recs(3, 1), 4) {
		t.Fatal("a closed stream took records")
	}
	if _, ok, _ := s.wanted(); ok {
		t.Fatal("a closed stream is still fetched")
	}
}

// A partition's fetch size follows how far its blocks expand when
// decoded: toward twice the partition fetch size, or twice the stream's
// limit in records when that is less, and the largest batch at least. It
// grows at most twofold, doubles when a batch did not fit, and blocks
// that reached the log's end leave it unchanged.
func TestStreamResize(t *testing.T) {
	const limit = 1 << 20
	// A block with records past it, of 100 records in batches of which
	// the largest decoded to largest bytes.
	backlog := func(decoded, largest int) blockShape {
		return blockShape{records: 100, decoded: decoded, largest: largest, behind: true}
	}
	// An uncompressed block of asked bytes of 300-byte records, in
	// batches of 100 KiB.
	slow := func(asked int) blockShape {
		n := asked * 3500 / (1 << 20)
		return blockShape{records: n, decoded: n * 300, largest: 100 << 10, behind: true}
	}
	for _, tc := range []struct {
		name        string
		asked       int32
		block       blockShape
		want        int32
		streamLimit int // records; 0: more than any block here
	}{
		{"uncompressed: a block decodes to about its size", limit, backlog(limit+limit/2, 100<<10), limit, 0},
		{"LZ4 at 11:1 from the first fetch's 64 KiB: twice as much", 64 << 10, backlog(11*64<<10, 300<<10), 128 << 10, 0},
		{"LZ4 at 11:1 from 128 KiB", 128 << 10, backlog(11*128<<10, 300<<10), 2 * limit * 128 / (11 * 128), 0},
		{"LZ4 at 11:1 from the full size", limit, backlog(11*limit, 300<<10), 2 * limit / 11, 0},
		{"a steady compressed partition keeps its size", 190 << 10, backlog(2*limit, 300<<10), 190 << 10, 0},
		{"never below the largest batch", 190 << 10, backlog(4*limit, 2*limit), 190 << 10 / 2, 0},
		{"never below the minimum", 64 << 10, backlog(1000*64<<10, 100<<10), minPartitionBytes, 0},
		{"a small block with records waiting: twice as much at most", 100 << 10, backlog(200<<10, 50<<10), 200 << 10, 0},
		{"up to the partition fetch size", 800 << 10, backlog(1000<<10, 100<<10), limit, 0},
		{"above it while the batches need it", 2 * limit, backlog(3*limit, 3*limit), 2 * limit, 0},
		{"a caught-up partition keeps its size", 190 << 10, blockShape{records: 3, decoded: 600, largest: 600}, 190 << 10, 0},
		{"an empty block changes nothing", 190 << 10, blockShape{}, 190 << 10, 0},
		{"a batch that did not fit doubles it", 190 << 10, blockShape{tooSmall: true}, 380 << 10, 0},
		{"beyond the partition fetch size for a large batch", limit, blockShape{tooSmall: true}, 2 * limit, 0},
		{"but not beyond a response", maxResponseBytes * 3 / 4, blockShape{tooSmall: true}, maxResponseBytes, 0},
		// A stream limit of 512 records, of 300 bytes each: blocks of
		// about 300 KiB are enough.
		{"a slow partition: toward twice its stream's limit", limit, slow(limit), limit * (2 * 512 * 300) / (3500 * 300), 512},
		{"a slow partition at that size stays there", 300 << 10, slow(300 << 10), 300 << 10 * (2 * 512 * 300) / (1025 * 300), 512},
		{"never below the least block", 64 << 10, blockShape{records: 1000, decoded: 1000 * 200, largest: 10_000, behind: true}, 64 << 10 * (64 << 10) / (1000 * 200), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream("t", 0, 0, cmp.Or(tc.streamLimit, 1<<20))
			s.size = tc.asked
			s.resize(tc.asked, tc.block, limit)
			if at, _, _ := s.wanted(); at.size != tc.want {
				t.Fatalf("next fetch asks for %d bytes, want %d", at.size, tc.want)
			}
		})
	}
}

// What a stream expects its next block to bring: before anything is
// known, a block of its fetch size decoded at a generous expansion, with
// records waiting; then what its last block decoded to and whether
// records were past it.
func TestStreamExpect(t *testing.T) {
	s := NewStream("t", 0, 0, 100)
	s.size = 64 << 10
	at, _, _ := s.wanted()
	if at.expect != unknownExpansion*64<<10 || !at.behind {
		t.Fatalf("first expectation %d (behind %v), want %d and behind", at.expect, at.behind, unknownExpansion*64<<10)
	}
	steps := []struct {
		records, decoded int
		behind           bool
	}{
		{5, 1000, true},
		{5, 4000, false},
		{0, 0, false},
		{1, 1500, true},
	}
	next := int64(0)
	for i, st := range steps {
		var chunks [][]Record
		if st.records > 0 {
			chunks = [][]Record{recs(next, int64(st.records))}
		}
		s.push(next, chunks, next+int64(st.records), blockShape{records: st.records, decoded: st.decoded, behind: st.behind})
		next += int64(st.records)
		s.Take(st.records)
		if at, _, _ := s.wanted(); at.expect != st.decoded || at.behind != st.behind {
			t.Fatalf("step %d: expect %d (behind %v), want %d (%v)", i, at.expect, at.behind, st.decoded, st.behind)
		}
	}
}
