// Package fetch reads the records of subscribed partitions from their
// leaders, one fetch loop per broker, into a bounded queue per partition
// (Stream).
//
// The consumer group (membership, assignment, offset commits) stays with
// sarama; this replaces only its partition consumers, for two reasons
// measured on the engine's benchmark. sarama hands records over one at a
// time through a channel, each in an allocation of its own, and fetches a
// broker's partitions again only once every record of the previous fetch
// has been taken, so a partition's reader waits for a whole round trip and
// decode after each fetch. Here a partition's records arrive as one slice
// per fetch, and a broker's next fetch leaves as soon as the previous one
// is decoded, for every partition whose queue has room.
package fetch

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// Options are the fetcher's settings. Zero values take sarama's defaults.
type Options struct {
	// MaxWait is how long a broker may hold a fetch while it has no new
	// records (the poll interval).
	MaxWait time.Duration
	// PartitionBytes is what a fetch asks for per partition. A record
	// larger than that is fetched by doubling the size for its partition
	// until it fits.
	PartitionBytes int32
	// RetryBackoff is the wait before a partition is fetched again after
	// an error (a broker down, a leader moved).
	RetryBackoff time.Duration
	// Pauses, if set, counts the times any stream was left out of fetches
	// because it held its limit.
	Pauses *atomic.Int64
	// Fetched, if set, sees each batch of records as a fetch response
	// delivers it, before it is queued: for measurements of how long
	// records wait after their fetch. It runs on the fetch loop and must
	// be quick and not keep rs: rs and its bytes are the response's.
	Fetched func(topic string, partition int32, rs []Record)
	Logger  *slog.Logger
}

// defaultPartitionBytes is sarama's Consumer.Fetch.Default. A response
// holds at most maxResponseBytes: less than a broker's own limit
// (fetch.max.bytes, 55 MiB by default), beyond which it answers the
// partitions left with nothing although they have records, which would
// read as batches too large for their fetch size (Stream.resize).
const (
	defaultPartitionBytes = 1 << 20
	maxResponseBytes      = 50 << 20
	firstPartitionBytes   = 64 << 10
)

func (o *Options) defaults() {
	if o.MaxWait <= 0 {
		o.MaxWait = 500 * time.Millisecond
	}
	if o.PartitionBytes <= 0 {
		o.PartitionBytes = defaultPartitionBytes
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Fetcher fetches the subscribed partitions. Create it with New and end it
// with Close.
type Fetcher struct {
	client sarama.Client
	opts   Options
	log    *slog.Logger

	mu      sync.Mutex
	brokers map[int32]*brokerLoop
	closed  bool

	wg   sync.WaitGroup
	done chan struct{}
}

// New makes a fetcher on client, which it uses for metadata, offsets and
// fetches, and which Close closes.
func New(client sarama.Client, opts Options) *Fetcher {
	opts.defaults()
	return &Fetcher{client: client, opts: opts, log: opts.Logger,
		brokers: make(map[int32]*brokerLoop), done: make(chan struct{})}
}

// Subscribe starts fetching a partition from offset (sarama.OffsetOldest
// and OffsetNewest are resolved first) into a stream that queues up to
// about limit records. Close the stream to stop.
func (f *Fetcher) Subscribe(topic string, partition int32, offset int64, limit int) *Stream {
	s := NewStream(topic, partition, offset, limit)
	// The first fetch is small: until a block has shown how far its
	// batches expand when decoded (Stream.resize), a fetch of the full
	// size could bring ten times that in records per partition.
	s.size = min(f.opts.PartitionBytes, firstPartitionBytes)
	if f.opts.Pauses != nil {
		s.pauses = f.opts.Pauses
	}
	f.place(s, 0, false)
	return s
}

// Close stops every fetch loop and closes the client. Streams get nothing
// more.
//
// The client is closed before the wait: it ends the fetches under way and
// the lookups of partitions waiting for a leader, which could otherwise
// hold Close for a dial timeout while a broker is unreachable.
func (f *Fetcher) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	close(f.done)
	f.mu.Unlock()
	err := f.client.Close()
	f.wg.Wait()
	if err != nil && !errors.Is(err, sarama.ErrClosedClient) {
		return fmt.Errorf("closing the fetch client: %w", err)
	}
	return nil
}

// place finds the stream's leader, after delay, and hands the stream to
// that broker's fetch loop. With reset, the stream's offset was out of
// range and moves to the nearest end of the log first.
func (f *Fetcher) place(s *Stream, delay time.Duration, reset bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for attempt := 0; ; attempt++ {
			retry := attempt > 0 || delay > 0
			if retry && !f.sleep(max(delay, f.opts.RetryBackoff)) {
				return
			}
			if s.isClosed() {
				return
			}
			if err := f.locate(s, retry, reset); err != nil {
				f.log.Warn("cannot fetch partition yet; retrying", slog.String("topic", s.topic),
					slog.Int("partition", int(s.partition)), slog.Any("error", err))
				continue
			}
			return
		}
	}()
}

// locate resolves the stream's offset if it has to, finds its leader and
// attaches it to the leader's fetch loop; refresh first refreshes the
// topic's metadata.
func (f *Fetcher) locate(s *Stream, refresh, reset bool) error {
	if refresh {
		if err := f.client.RefreshMetadata(s.topic); err != nil {
			return fmt.Errorf("refreshing metadata: %w", err)
		}
	}
	from := s.position()
	if from < 0 || reset {
		to, err := f.resolve(s, from)
		if err != nil {
			return err
		}
		s.seek(from, to)
	}
	leader, epoch, err := f.client.LeaderAndEpoch(s.topic, s.partition)
	if err != nil {
		return fmt.Errorf("finding the leader: %w", err)
	}
	s.setEpoch(epoch)
	f.attach(leader, s)
	return nil
}

// attach hands s to the fetch loop of its leader, starting one if there is
// none.
func (f *Fetcher) attach(leader *sarama.Broker, s *Stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	b := f.brokers[leader.ID()]
	var moved []*Stream
	if b != nil && b.broker != leader {
		// sarama opened a new connection to the broker (it dropped the old
		// one after an error, or the broker moved): a loop on it takes
		// over the old loop's streams, which would otherwise wait on a
		// loop nothing wakes.
		moved = b.end()
		b = nil
	}
	if b == nil {
		b = &brokerLoop{f: f, broker: leader, wakeup: make(chan struct{}, 1)}
		f.brokers[leader.ID()] = b
		f.wg.Add(1)
		go b.run()
	}
	for _, m := range moved {
		b.add(m)
	}
	b.add(s)
}

// resolve turns a sentinel offset into a real one, and an offset out of
// range into the nearer end of the log: the oldest offset when it fell
// below the log's start (retention deleted those records), the log's end
// when it is past it (the log was truncated).
func (f *Fetcher) resolve(s *Stream, from int64) (int64, error) {
	switch from {
	case sarama.OffsetOldest, sarama.OffsetNewest:
		o, err := f.client.GetOffset(s.topic, s.partition, from)
		if err != nil {
			return 0, fmt.Errorf("resolving the start offset: %w", err)
		}
		return o, nil
	}
	oldest, err := f.client.GetOffset(s.topic, s.partition, sarama.OffsetOldest)
	if err != nil {
		return 0, fmt.Errorf("finding the oldest offset: %w", err)
	}
	newest, err := f.client.GetOffset(s.topic, s.partition, sarama.OffsetNewest)
	if err != nil {
		return 0, fmt.Errorf("finding the newest offset: %w", err)
	}
	to := oldest
	switch {
	case from > newest:
		to = newest
	case from >= oldest:
		// Back in range by now (the log grew again after a truncation):
		// nothing to skip.
		to = from
	}
	f.log.Warn("fetch offset out of range; moving to the nearest end of the log", slog.String("topic", s.topic),
		slog.Int("partition", int(s.partition)), slog.Int64("offset", from), slog.Int64("oldest", oldest),
		slog.Int64("newest", newest), slog.Int64("to", to))
	return to, nil
}

// sleep waits d, reporting false if the fetcher closed meanwhile.
func (f *Fetcher) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.done:
		return false
	}
}

// detach forgets a fetch loop that stopped on a broker error.
func (f *Fetcher) detach(b *brokerLoop) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.brokers[b.broker.ID()] == b {
		delete(f.brokers, b.broker.ID())
	}
}
