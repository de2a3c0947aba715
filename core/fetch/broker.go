package fetch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"unsafe"

	"github.com/IBM/sarama"
)

// brokerLoop fetches the streams whose leader is one broker, one fetch at
// a time (a broker answers a connection's requests in order anyway), each
// leaving as soon as the one before is decoded.
type brokerLoop struct {
	f      *Fetcher
	broker *sarama.Broker
	wakeup chan struct{}

	mu      sync.Mutex
	streams []*Stream
	ended   bool // after a broker error, or replaced (Fetcher.attach)
	turn    int  // the first stream the next fetch considers, mod len(streams)

	// scratch holds a block's records as decoded, before they are copied
	// out in chunks; only the loop's goroutine uses it.
	scratch []Record
}

// maxScratch is the most records a loop's scratch keeps room for between
// fetches: a block that decoded to more (a first fetch, a partition grown
// for a large batch) is not kept around for the loop's lifetime.
const maxScratch = 16 << 10

// keepScratch keeps rs's array for the next block, emptied: it must not
// keep the response's buffers alive.
func (b *brokerLoop) keepScratch(rs []Record) {
	if cap(rs) > maxScratch {
		b.scratch = nil
		return
	}
	clear(rs)
	b.scratch = rs[:0]
}

// responseBudget is about the most a fetch response is expected to decode
// to, in bytes of records and their structs. A response is decoded whole
// before any of it is queued, and may hold up to maxResponseBytes on the
// wire, which compressed batches decode to ten times over. A fetch asks
// for partitions, in turn, until what they are expected to bring
// (fetchAt.expect) reaches the budget, and for one at least: eight
// partitions whose blocks decode to about 2 MiB (Stream.resize) fit.
const responseBudget = 16 << 20

// recordSize is what a queued record holds beside its bytes.
const recordSize = int(unsafe.Sizeof(Record{}))

// asked is a stream in a fetch and what was asked for it.
type asked struct {
	s  *Stream
	at fetchAt
}

func (b *brokerLoop) signal() {
	select {
	case b.wakeup <- struct{}{}:
	default:
	}
}

// add makes the loop fetch s. Only Fetcher.attach calls it, under the
// fetcher's lock, on a loop in the fetcher's map, which has not ended: a
// loop leaves the map before it ends (fail), or in the same critical
// section (attach replacing it).
func (b *brokerLoop) add(s *Stream) {
	b.mu.Lock()
	b.streams = append(b.streams, s)
	s.owner.Store(b)
	b.mu.Unlock()
	b.signal()
}

// remove stops fetching s here, and reports whether the loop had it. Only
// the one that takes a stream out of a loop moves it on, so a stream is
// never fetched by two loops.
func (b *brokerLoop) remove(s *Stream) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, o := range b.streams {
		if o == s {
			b.streams = append(b.streams[:i], b.streams[i+1:]...)
			return true
		}
	}
	return false
}

// end stops the loop and returns the streams it had: after a broker error
// (fail), or when a loop on a new connection to the broker replaces it
// (Fetcher.attach).
func (b *brokerLoop) end() []*Stream {
	b.mu.Lock()
	b.ended = true
	streams := b.streams
	b.streams = nil
	b.mu.Unlock()
	b.signal()
	return streams
}

func (b *brokerLoop) run() {
	defer b.f.wg.Done()
	var ask []asked
	for {
		var req *sarama.FetchRequest
		var ok bool
		req, ask, ok = b.request(ask[:0])
		if !ok {
			return
		}
		if req == nil {
			select {
			case <-b.wakeup:
				continue
			case <-b.f.done:
				return
			}
		}
		resp, err := b.broker.Fetch(req)
		select {
		case <-b.f.done:
			// Close closes the client, which fails the fetch under way.
			return
		default:
		}
		if err != nil {
			b.fail(err)
			return
		}
		for _, a := range ask {
			b.deliver(resp, a)
		}
		clear(ask)
	}
}

// request builds the next fetch from the streams with room, or returns
// nil when none has any; ok is false once the loop has ended.
func (b *brokerLoop) request(ask []asked) (req *sarama.FetchRequest, _ []asked, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return nil, ask, false
	}
	live := b.streams[:0]
	for _, s := range b.streams {
		if !s.isClosed() {
			live = append(live, s)
		}
	}
	clear(b.streams[len(live):])
	b.streams = live
	// Streams take turns at the head of the fetch, so a budget that
	// leaves some out leaves out different ones each time.
	expected, next, behindLeftOut := 0, -1, false
	for i := range live {
		j := (b.turn + i) % len(live)
		s := live[j]
		at, ok, _ := s.wanted()
		if !ok {
			continue
		}
		if len(ask) > 0 && expected+at.expect > responseBudget {
			if next < 0 {
				next = j
			}
			behindLeftOut = behindLeftOut || at.behind
			continue
		}
		expected += at.expect
		ask = append(ask, asked{s: s, at: at})
	}
	if next >= 0 {
		b.turn = next
	}
	if len(ask) == 0 {
		return nil, ask, true
	}
	wait := b.f.opts.MaxWait
	if behindLeftOut {
		// Partitions with records waiting were left out: the broker must
		// not hold the fetch while those asked for have nothing new.
		wait = 0
	}
	req = &sarama.FetchRequest{
		// Version 12 is what sarama's consumer sends to the brokers we
		// support (Kafka 2.7 and later). Fetch sessions (KIP-227) are not
		// used: session 0, epoch -1.
		Version:      12,
		MinBytes:     1,
		MaxWaitTime:  int32(wait.Milliseconds()),
		MaxBytes:     maxResponseBytes,
		Isolation:    sarama.ReadUncommitted,
		SessionID:    0,
		SessionEpoch: -1,
	}
	for _, a := range ask {
		req.AddBlock(a.s.topic, a.s.partition, a.at.offset, a.at.size, a.at.epoch)
	}
	return req, ask, true
}

// deliver queues what the response holds for one stream, or moves the
// stream on an error.
func (b *brokerLoop) deliver(resp *sarama.FetchResponse, a asked) {
	s := a.s
	block := resp.GetBlock(s.topic, s.partition)
	if block == nil {
		// Not in the response (a broker may leave partitions out when the
		// response is full): asked again next time.
		return
	}
	switch {
	case errors.Is(block.Err, sarama.ErrNoError):
		s.hwm.Store(block.HighWaterMarkOffset)
		out := recordsInto(b.scratch, block, a.at.offset)
		chunks, bytes := detachChunks(out.records)
		if f := b.f.opts.Fetched; f != nil && len(out.records) > 0 {
			f(s.topic, s.partition, out.records)
		}
		n := len(out.records)
		b.keepScratch(out.records)
		shape := blockShape{records: n, decoded: bytes + n*recordSize, largest: out.largest + out.largestRecords*recordSize,
			behind:   out.next < block.HighWaterMarkOffset,
			tooSmall: out.partial || (n == 0 && out.next == a.at.offset && block.HighWaterMarkOffset > a.at.offset)}
		s.resize(a.at.size, shape, b.f.opts.PartitionBytes)
		s.push(a.at.offset, chunks, out.next, shape)
		// The block's decoded records are garbage from here on, not only
		// once the whole response has been delivered.
		delete(resp.Blocks[s.topic], s.partition)
	case errors.Is(block.Err, sarama.ErrOffsetOutOfRange):
		if b.remove(s) {
			b.f.place(s, 0, true)
		}
	default:
		level := slog.LevelWarn
		if leadership(block.Err) {
			level = slog.LevelInfo
		}
		b.f.log.Log(context.Background(), level, "partition fetch failed; finding its leader again", slog.String("topic", s.topic),
			slog.Int("partition", int(s.partition)), slog.Any("error", block.Err))
		if b.remove(s) {
			b.f.place(s, b.f.opts.RetryBackoff, false)
		}
	}
}

// fail ends the loop after a broker error: its streams look for their
// leaders again after the backoff.
func (b *brokerLoop) fail(err error) {
	b.f.log.Warn("fetch from broker failed; finding the leaders again", slog.Int("broker", int(b.broker.ID())),
		slog.String("addr", b.broker.Addr()), slog.Any("error", err))
	// Closed before the loop leaves the map, so that no new loop starts on
	// the broken connection; the client reopens it on its next use.
	_ = b.broker.Close()
	b.f.detach(b)
	for _, s := range b.end() {
		b.f.place(s, b.f.opts.RetryBackoff, false)
	}
}

// leadership reports errors that only mean the partition's leader moved.
func leadership(err sarama.KError) bool {
	switch err {
	case sarama.ErrNotLeaderForPartition, sarama.ErrLeaderNotAvailable, sarama.ErrReplicaNotAvailable,
		sarama.ErrFencedLeaderEpoch, sarama.ErrUnknownLeaderEpoch, sarama.ErrUnknownTopicOrPartition,
		sarama.ErrOffsetNotAvailable:
		return true
	}
	return false
}
