package fetch

import (
	"sync"
	"sync/atomic"
)

// Stream is one subscribed partition: a FIFO of fetched records that the
// fetcher fills and one reader takes from.
//
// The queue is the partition's backpressure. The fetcher leaves a stream
// out of its fetches while the stream holds limit records or more, so
// memory is bounded by the limit plus one fetch response, and a reader
// that stops taking (its partition is full of unfinished work) stops the
// fetching of its partition only.
type Stream struct {
	topic     string
	partition int32

	ready chan struct{} // signalled when records are added

	mu      sync.Mutex
	batches [][]Record // batches[0][head:] is next
	head    int
	queued  int
	limit   int
	next    int64 // offset the next fetch starts from
	closed  bool
	full    bool // left out of fetches since the last time it had room

	size int32 // bytes asked for per fetch
	// What the last block decoded to and whether records were past it,
	// once fetched is set (fetchAt).
	expect  int
	behind  bool
	fetched bool
	epoch   int32 // the leader's epoch when the stream was placed; -1: unknown

	pauses *atomic.Int64              // its own, or its fetcher's (Options.Pauses)
	owner  atomic.Pointer[brokerLoop] // the loop fetching the stream, or the last one
	// hwm is the partition's high-water mark as of its last fetch, -1
	// before the first.
	hwm atomic.Int64
	// start is where a stream subscribed at a sentinel offset (oldest,
	// newest) starts, once resolved; -1 until then.
	start atomic.Int64
}

// NewStream makes a stream of a partition whose next record is at offset
// next, fetched while fewer than limit records are queued. Records reach it
// through Push; Fetcher.Subscribe makes streams the fetcher fills.
func NewStream(topic string, partition int32, next int64, limit int) *Stream {
	s := &Stream{topic: topic, partition: partition, next: next, limit: max(limit, 1),
		size: defaultPartitionBytes, epoch: -1, pauses: new(atomic.Int64), ready: make(chan struct{}, 1)}
	s.hwm.Store(-1)
	s.start.Store(next)
	if next < 0 {
		s.start.Store(-1)
	}
	return s
}

// Start is the offset the stream started at: the one it was subscribed
// at, or where that was moved to (a sentinel resolved, an offset out of
// the log's range moved to its nearer end); -1 while that is not known.
func (s *Stream) Start() int64 { return s.start.Load() }

// HighWaterMark is the partition's high-water mark (the offset after its
// last record) as its last fetch reported it; -1 before the first. A
// stream left out of fetches keeps the one of its last fetch.
func (s *Stream) HighWaterMark() int64 { return s.hwm.Load() }

// Paused reports whether the stream is left out of fetches for holding
// its limit of records.
func (s *Stream) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full
}

// wakeOwner tells the loop fetching the stream that it has room again. A
// stream between loops has none, or a stale one: the loop it joins next
// looks at it anyway.
func (s *Stream) wakeOwner() {
	if b := s.owner.Load(); b != nil {
		b.signal()
	}
}

// Ready is signalled when records are added. A signal may be stale: Peek
// tells what is there.
func (s *Stream) Ready() <-chan struct{} { return s.ready }

// Peek returns up to max of the oldest queued records, all from one fetch,
// without taking them. The slice stays valid after Take.
func (s *Stream) Peek(max int) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.batches) == 0 {
		return nil
	}
	b := s.batches[0][s.head:]
	if len(b) > max {
		b = b[:max]
	}
	return b
}

// Take removes the n oldest queued records (n at most what Peek returned).
func (s *Stream) Take(n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.head += n
	s.queued -= n
	if s.head >= len(s.batches[0]) {
		s.batches[0] = nil
		s.batches = s.batches[1:]
		s.head = 0
	}
	wake := s.roomAgainLocked()
	s.mu.Unlock()
	if wake {
		s.wakeOwner()
	}
}

// Queued is the number of records queued.
func (s *Stream) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// SetLimit changes how many records the stream queues before the fetcher
// leaves it out.
func (s *Stream) SetLimit(limit int) {
	s.mu.Lock()
	s.limit = max(limit, 1)
	wake := s.roomAgainLocked()
	s.mu.Unlock()
	if wake {
		s.wakeOwner()
	}
}

// roomAgainLocked reports, once, that a stream left out of fetches has
// room again: the caller wakes the fetcher once it has unlocked s.mu.
func (s *Stream) roomAgainLocked() bool {
	if s.full && s.queued < s.limit {
		s.full = false
		return true
	}
	return false
}

// Pauses is how many times the fetcher left the stream (and, for a stream
// of a fetcher with Options.Pauses, its other streams) out of its fetches
// because it held limit records.
func (s *Stream) Pauses() int64 { return s.pauses.Load() }

// Push appends fetched records, whose offsets follow those queued before,
// and sets the offset of the next fetch. It drops them if the stream is
// closed or next no longer is at the offset they were fetched from.
func (s *Stream) Push(from int64, rs []Record, next int64) bool {
	return s.push(from, [][]Record{rs}, next, blockShape{records: len(rs)})
}

// push is Push for a block in chunks (detachChunks), of the given shape,
// which tells the next fetches what to expect (fetchAt).
func (s *Stream) push(from int64, chunks [][]Record, next int64, shape blockShape) bool {
	n := shape.records
	s.mu.Lock()
	if s.closed || s.next != from {
		s.mu.Unlock()
		return false
	}
	s.next = next
	if n > 0 {
		s.batches = append(s.batches, chunks...)
		s.queued += n
	}
	if shape.tooSmall {
		// Records are waiting, in a batch larger than asked for: what it
		// decodes to is not known, and no less than expected before.
		s.behind = true
	} else {
		s.expect, s.behind = shape.decoded, shape.behind
	}
	s.fetched = true
	s.mu.Unlock()
	if n > 0 {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
	return true
}

// wanted reports whether the stream should be in the next fetch, and
// what to ask for; closed says it never will be again.
func (s *Stream) wanted() (at fetchAt, ok, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fetchAt{}, false, true
	}
	if s.queued >= s.limit {
		if !s.full {
			s.full = true
			s.pauses.Add(1)
		}
		return fetchAt{}, false, false
	}
	at = fetchAt{offset: s.next, size: s.size, epoch: s.epoch, expect: s.expect, behind: s.behind}
	if !s.fetched {
		// Nothing known yet: as if its batches were compressed about as
		// well as LZ4 compresses JSON, with records waiting.
		at.expect, at.behind = unknownExpansion*int(s.size), true
	}
	return at, true, false
}

// unknownExpansion is what a partition's first block is expected to
// decode to, in the bytes its fetch asks for: about what JSON records
// compressed with LZ4 in large batches expand to, with room to spare.
const unknownExpansion = 32

// fetchAt is what a fetch asks for a stream: where to start, how many
// bytes, and the leader epoch the stream's metadata knows (the broker
// rejects the fetch if its own is newer or older). expect is how many
// bytes of records its block is expected to decode to, and behind whether
// the partition is expected to have records waiting: what its last block
// decoded to, and whether it had records past that block.
type fetchAt struct {
	offset      int64
	size, epoch int32
	expect      int
	behind      bool
}

// setEpoch records the leader epoch of the metadata that placed the
// stream.
func (s *Stream) setEpoch(epoch int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch = epoch
}

// minPartitionBytes is the least a partition's fetch asks for, and
// minBlockBytes the least a block is meant to decode to (resize).
const (
	minPartitionBytes = 8 << 10
	minBlockBytes     = 64 << 10
)

// blockShape is what a fetched block tells about the partition's next
// fetch size (resize).
type blockShape struct {
	records int
	decoded int  // bytes of the records and of their Record structs
	largest int  // the decoded bytes of its largest producer batch
	behind  bool // the partition had records past the block
	// tooSmall: the fetch brought no record while records were waiting,
	// so the first batch is larger than the size asked. Fetch versions 3
	// and later return nothing for such a partition, unless it is the
	// first with records in the response, which gets its first batch
	// whole; earlier ones cut the batch short.
	tooSmall bool
}

// resize sets the bytes the next fetch asks for from the block a fetch of
// asked bytes brought.
//
// A block is whole producer batches up to the size asked, and compressed
// batches decode to several times their size: an LZ4 topic of JSON
// records decoded to 11 times the bytes fetched, all of it held while any
// of the block's records waits. So the size follows what blocks decode
// to: about twice the partition fetch size (limit), or twice the stream's
// limit in records when that is less (a partition read slowly would only
// hold the rest in memory), and the block's largest batch at least, so
// that a fetch stays about as large as a batch: one smaller than the
// batch at its offset brings nothing and costs a round trip, after which
// the size doubles. The size grows at most twofold per fetch (a block
// may end short of the size asked at the end of a log segment). It stays
// under the partition fetch size unless the batches need more. A block that
// reached the end of the log says nothing about the size: a partition
// that caught up keeps the size it had, so a backlog that builds up later
// is fetched as the one before was.
func (s *Stream) resize(asked int32, b blockShape, limit int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	size := int64(asked)
	if b.tooSmall {
		s.size = int32(min(2*size, maxResponseBytes))
		return
	}
	if b.records == 0 || !b.behind {
		return
	}
	decoded, largest := int64(b.decoded), int64(b.largest)
	want := min(2*int64(limit), max(2*int64(s.limit)*(decoded/int64(b.records)), minBlockBytes))
	want = max(want, largest)
	next := min(size*want/decoded, 2*size)
	ceiling := max(int64(limit), size*largest*3/2/decoded)
	s.size = int32(min(max(next, minPartitionBytes), ceiling))
}

// position is the offset of the next fetch.
func (s *Stream) position() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// seek moves the next fetch to offset, if the stream is still at from.
func (s *Stream) seek(from, offset int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.next != from {
		return false
	}
	s.next = offset
	if s.start.Load() == from || from < 0 {
		// Still where it started: a sentinel resolved, or a start out of
		// the log's range moved to its end.
		s.start.Store(offset)
	}
	return true
}

// isClosed reports whether Close was called.
func (s *Stream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close ends the subscription: nothing more is fetched or queued, and what
// is queued is dropped.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closed = true
	s.batches, s.head, s.queued = nil, 0, 0
	s.mu.Unlock()
	s.wakeOwner()
}
