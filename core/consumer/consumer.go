// Package consumer is the engine: it consumes a set of topics as one member
// of a consumer group and runs every record through a middleware chain,
// one event in flight per key, many keys at once.
//
// The data path reads in one direction: sarama claim (one per assigned
// partition) → partition.admit (rewind filter, offset tracking, decoding,
// loop and event-type filters) → per-key queue → the mode's middleware
// stack → handler → partition.complete (offset finished or left for the
// next owner) → watermark marked for sarama's periodic commit.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/filter"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// ErrStopped is the cancellation cause handlers see when the consumer stops.
var ErrStopped = fault.Terminal(errors.New("prosody: consumer stopped"))

// Stats are counters for tests and observability.
type Stats struct {
	handled, failed, filtered, undecodable, pauses, timers atomic.Int64
	offloads, handovers                                    atomic.Int64
	// byReason counts the records filtered or undecodable, by reason.
	byReason [filter.NumReasons]atomic.Int64
}

// Skipped is the number of records not handed to a handler for reason
// (a filter's, or a decoding failure's).
func (s *Stats) Skipped(reason filter.Reason) int64 {
	if int(reason) >= len(s.byReason) {
		return 0
	}
	return s.byReason[reason].Load()
}

func (s *Stats) skip(reason filter.Reason) {
	if int(reason) < len(s.byReason) {
		s.byReason[reason].Add(1)
	}
}

// Offloads is how many times a partition started sending its runs to the
// executor because they were slow to run inline (see intake.go).
func (s *Stats) Offloads() int64 { return s.offloads.Load() }

// Handovers is how many times a partition's intake moved to a new
// goroutine because its driver was stuck in a run.
func (s *Stats) Handovers() int64 { return s.handovers.Load() }

// Timers is the number of timer events handled (or failed and skipped).
func (s *Stats) Timers() int64 { return s.timers.Load() }

// Pauses is how many times a partition was left out of fetches because it
// held as many fetched records as it may queue (see holdRate.limit): it
// fetches faster than it finishes, or had max_uncommitted unfinished
// offsets for a while.
func (s *Stats) Pauses() int64 { return s.pauses.Load() }

// Handled is the number of events whose handler succeeded.
func (s *Stats) Handled() int64 { return s.handled.Load() }

// Failed is the number of events skipped after a permanent failure or
// after their retries were spent.
func (s *Stats) Failed() int64 { return s.failed.Load() }

// Filtered is the number of records skipped by the loop or type filters.
func (s *Stats) Filtered() int64 { return s.filtered.Load() }

// Undecodable is the number of records skipped because they had no key, a
// key that is not UTF-8, or a value that is not JSON.
func (s *Stats) Undecodable() int64 { return s.undecodable.Load() }

type topicPartition struct {
	topic string
	id    int32
}

// Consumer is a running group member. Create it with Start; Stop drains it.
type Consumer struct {
	opts       Options
	log        *slog.Logger
	eventTypes filter.EventTypes
	group      sarama.ConsumerGroup
	fetcher    *fetch.Fetcher // with a client of its own, apart from the group's
	loader     *fetch.Loader  // reads deferred messages back (with Options.Deferral), on a client of its own
	exec       *executor
	rescue     *rescuer
	slowRun    time.Duration // see intake.go; a field so tests can change it
	stats      Stats

	mu         sync.Mutex
	partitions map[topicPartition]*partition

	stop     context.CancelFunc
	stopping atomic.Bool // Stop was called: drains cancel with ErrStopped
	stopOnce sync.Once
	done     chan struct{}
}

// Start joins the group and begins consuming; events run through
// opts.Stacks.
func Start(opts Options) (*Consumer, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	brokers := opts.Brokers
	if opts.Mock {
		cluster, err := mockbroker.Shared()
		if err != nil {
			return nil, fmt.Errorf("starting the mock cluster: %w", err)
		}
		brokers = cluster.Addrs()
		// Subscribing creates the topics in mock mode, so a test can
		// subscribe before anything was produced.
		for _, t := range opts.Topics {
			if err := cluster.EnsureTopic(context.Background(), t, 0); err != nil {
				return nil, fmt.Errorf("creating mock topic %q: %w", t, err)
			}
		}
	}
	cfg, err := opts.saramaConfig()
	if err != nil {
		return nil, err
	}
	// A client of its own keeps the fetches' long polls off the
	// connections carrying the group's heartbeats and commits.
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %v: %w", brokers, opts.Security.Explain(err))
	}
	group, err := sarama.NewConsumerGroup(brokers, opts.GroupID, cfg)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("joining consumer group %q: %w", opts.GroupID, opts.Security.Explain(err))
	}
	log := opts.Logger.With(slog.String("group", opts.GroupID))
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{
		opts:       opts,
		log:        log,
		eventTypes: filter.NewEventTypes(opts.AllowedEvents),
		group:      group,
		exec:       newExecutor(),
		rescue:     newRescuer(),
		slowRun:    slowRun,
		partitions: make(map[topicPartition]*partition),
		stop:       cancel,
		done:       make(chan struct{}),
	}
	c.fetcher = fetch.New(client, fetch.Options{MaxWait: opts.PollInterval, Pauses: &c.stats.pauses, Fetched: opts.Fetched, Logger: log})
	if opts.Deferral != nil {
		// Point reads on the fetch loop's connections would queue behind
		// its long polls: a client of their own.
		lc, err := sarama.NewClient(brokers, cfg)
		if err != nil {
			cancel()
			c.fetcher.Close()
			group.Close()
			return nil, fmt.Errorf("connecting the deferred-message loader to %v: %w", brokers, opts.Security.Explain(err))
		}
		lo := opts.Deferral.Loader
		if lo.MaxInFlight <= 0 {
			lo.MaxInFlight = opts.MaxUncommitted
		}
		if lo.Logger == nil {
			lo.Logger = log
		}
		c.loader = fetch.NewLoader(lc, lo)
	}
	go c.logErrors()
	go c.consume(ctx)
	return c, nil
}

// consume keeps the member in the group until Stop. With the cooperative
// protocol one Consume call survives rebalances; it returns only on errors
// (retried after a pause) or when the context ends.
func (c *Consumer) consume(ctx context.Context) {
	defer close(c.done)
	// Every claim has returned (so every partition has drained) once
	// Consume returns for the last time.
	defer c.exec.close()
	defer c.rescue.close()
	h := &groupHandler{c: c}
	for ctx.Err() == nil {
		err := c.group.Consume(ctx, c.opts.Topics, h)
		if err == nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			continue
		}
		c.log.Error("consumer group session failed; rejoining", slog.Any("error", err))
		select {
		case <-ctx.Done():
		case <-time.After(c.opts.PollInterval):
		}
	}
}

func (c *Consumer) logErrors() {
	for err := range c.group.Errors() {
		c.log.Warn("kafka consumer error", slog.Any("error", err))
	}
}

// Stop leaves the group the way a revocation does: every partition stops
// taking work, in-flight handlers get up to shutdown_timeout (cancelled near
// its end), the final watermarks are committed, then the member leaves.
// ctx bounds the wait; Stop is safe to call more than once.
func (c *Consumer) Stop(ctx context.Context) error {
	var err error
	c.stopOnce.Do(func() {
		c.stopping.Store(true)
		// Before the group hears of it: from this call on, no handler
		// starts that had not started yet.
		// (Outside c.mu: giving permits back may run a waiting handler on
		// this goroutine.)
		c.mu.Lock()
		ps := make([]*partition, 0, len(c.partitions))
		for _, p := range c.partitions {
			ps = append(ps, p)
		}
		c.mu.Unlock()
		for _, p := range ps {
			p.stopStarting()
		}
		c.stop()
		select {
		case <-c.done:
		case <-ctx.Done():
			err = fmt.Errorf("stopping consumer: %w", ctx.Err())
		}
		if cerr := c.group.Close(); cerr != nil && !errors.Is(cerr, sarama.ErrClosedConsumerGroup) {
			err = errors.Join(err, fmt.Errorf("closing consumer group: %w", cerr))
		}
		// Every claim has ended (its stream closed) once the group is
		// closed.
		if cerr := c.fetcher.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if c.loader != nil {
			if cerr := c.loader.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	})
	return err
}

// AssignedPartitions is the number of partitions this member owns now.
func (c *Consumer) AssignedPartitions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.partitions)
}

// Partitions reports the state of every assigned partition.
func (c *Consumer) Partitions() []PartitionStatus {
	c.mu.Lock()
	ps := make([]*partition, 0, len(c.partitions))
	for _, p := range c.partitions {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	out := make([]PartitionStatus, len(ps))
	for i, p := range ps {
		out[i] = p.status()
	}
	return out
}

// Stalled reports whether any partition has had an unfinished offset for
// longer than stall_threshold.
func (c *Consumer) Stalled() bool {
	c.mu.Lock()
	ps := make([]*partition, 0, len(c.partitions))
	for _, p := range c.partitions {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	now := time.Now()
	stalled := false
	for _, p := range ps {
		if p.stalled(now) {
			stalled = true
		}
	}
	return stalled
}

// holdLimit is the fewest fetched records a partition's stream queues
// beyond its unfinished offsets before the fetcher leaves it out.
func (c *Consumer) holdLimit() int {
	return max(4*c.opts.MaxUncommitted, 512)
}

// holdRate measures how fast a partition admits records, to size its
// stream.
type holdRate struct {
	admitted int       // since the limit was last worked out
	last     time.Time // when it was
	perSec   float64   // smoothed
}

// limit returns how many records the partition's stream may queue before
// it is left out of fetches.
//
// A partition left out is fetched again once it has room, and gets records
// a fetch round trip later. A limit of a fixed handful of records would
// leave the handlers idle for that wait once per fetch, whenever fetches
// bring more than the limit. So the limit is twice what the partition
// admits in a poll interval (it has at least that much work left while the
// next fetch is under way), and never below holdLimit. Queued memory thus
// stays bounded by about two poll intervals of processing plus one fetch
// response; a slow partition keeps the fixed limit.
func (r *holdRate) limit(now time.Time, holdLimit int, interval time.Duration) int {
	if !r.last.IsZero() {
		if el := now.Sub(r.last).Seconds(); el > 0 {
			r.perSec = 0.5*r.perSec + 0.5*float64(r.admitted)/el
		}
	}
	r.admitted, r.last = 0, now
	return max(holdLimit, 2*int(r.perSec*interval.Seconds()))
}

// maxBurst is the most records a partition's driver admits at once.
const maxBurst = 256

// Stats returns the consumer's counters.
func (c *Consumer) Stats() *Stats { return &c.stats }

func (c *Consumer) register(p *partition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitions[topicPartition{p.topic, p.id}] = p
}

func (c *Consumer) unregister(p *partition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.partitions, topicPartition{p.topic, p.id})
}

// groupHandler adapts the Consumer to sarama's ConsumerGroupHandler.
type groupHandler struct{ c *Consumer }

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim runs the partition's intake (intake.go) until the claim
// ends, then drains the partition and marks its final watermark. The
// intake runs on goroutines of its own: a handler that ignores its
// cancellation must not keep this call from returning at the end of the
// shutdown budget.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	c := h.c
	p := newPartition(c, claim.Topic(), claim.Partition())
	p.initial = claim.InitialOffset() // before status can read it
	c.register(p)
	defer c.unregister(p)
	p.log.Info("partition assigned", slog.Int64("initial_offset", claim.InitialOffset()))
	if c.opts.Timers != nil {
		released := make(chan struct{})
		opened := make(chan struct{})
		go func() {
			defer close(opened)
			p.openTimers(released)
		}()
		defer func() {
			close(released)
			<-opened
			p.stopTimers()
		}()
	}

	// The fetcher reads the partition (package fetch); sarama's own
	// partition consumer of the claim stays paused, and a later claim of
	// the partition starts paused, since sarama remembers it.
	c.group.Pause(map[string][]int32{p.topic: {p.id}})
	stream := c.fetcher.Subscribe(p.topic, p.id, claim.InitialOffset(), c.holdLimit())
	p.stream.Store(stream)
	in := newIntake(stream, claim.Messages(), c.opts.PollInterval, c.holdLimit(),
		func(o int64) { sess.MarkOffset(p.topic, p.id, o, "") })
	defer in.tick.Stop()
	p.startIntake(in)
	defer c.rescue.remove(p)
	// The session's end (the member leaves the group) is when nothing new
	// may start; sarama closes the claim only once its partition consumers
	// have stopped, which takes a while. A claim revoked by a cooperative
	// rebalance ends with its channel, which the driver looks for between
	// bursts (drive).
	go func() {
		select {
		case <-sess.Context().Done():
			p.stopStarting()
		case <-in.done:
		}
	}()
	if c.stopping.Load() {
		p.stopStarting() // claimed while Stop ran
	}
	<-in.done

	cause := event.ErrRevoked
	if c.stopping.Load() {
		cause = ErrStopped
	}
	p.log.Info("partition released; draining", slog.Int("unfinished", p.outstanding()), slog.Int("fetched_unread", in.unread))
	drainStart := time.Now()
	p.drain(c.opts.ShutdownTimeout, cause)
	p.releaseLayers(c.opts.ShutdownTimeout - time.Since(drainStart))
	if o, ok := p.commitOffset(); ok {
		sess.MarkOffset(p.topic, p.id, o, "")
	}
	p.log.Info("partition drained", slog.Int("unfinished", p.outstanding()))
	return nil
}
