// Package client is Prosody's high-level client: one object that sends
// (idempotent producer with the source-system header), subscribes a handler
// (the consumer engine with the middleware chain of the configured mode),
// and reports its state and health. Go programs use it directly; the C ABI
// and the language bindings wrap it.
package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/consumer"
	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/emitter"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/logging"
	"github.com/prosody-events/prosody-go/core/metrics"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/probe"
	"github.com/prosody-events/prosody-go/core/producer"
	"github.com/prosody-events/prosody-go/core/state"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/timerwake"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// State is the consumer's lifecycle state, as the bindings report it.
type State string

const (
	// Unconfigured: no consumer can run (no group id or no topics).
	Unconfigured State = "unconfigured"
	// Configured: ready to subscribe, or unsubscribed again.
	Configured State = "configured"
	// Running: subscribed.
	Running State = "running"
)

// Errors reported by the client's state machine.
var (
	ErrAlreadySubscribed = errors.New("prosody: the consumer is already subscribed")
	ErrNotSubscribed     = errors.New("prosody: the consumer is not subscribed")
	ErrClosed            = errors.New("prosody: the client is closed")
)

// Option customises a Client beyond its configuration.
type Option func(*Client)

// WithLogger sends the client's logs to l instead of stderr (the C ABI uses
// it to forward records to the host).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithPreciseTimers wakes the Go runtime's scheduler every period while
// handlers run, so that the timers Go handlers wait on (time.Sleep,
// time.After, context deadlines) fire within about a period of their
// time instead of up to a millisecond late (package timerwake). It suits
// handlers that wait on timers of a few milliseconds: 5 ms sleeps under
// max_concurrency 32 go from 0.87 to 0.96 of the 6,400/s they allow. It
// costs 5–10 % of a core while handlers run, whatever they wait on;
// handlers that wait on the network gain nothing (readiness wakes the
// runtime at once). Off by default, and with a period of 0 or less; a
// period is clamped to timerwake.MinPeriod–MaxPeriod (20 µs–1 ms). Only
// on Linux (elsewhere the runtime's timers are precise already), and
// only for Go handlers: Python and Node handlers wait on their own event
// loops' timers.
func WithPreciseTimers(period time.Duration) Option {
	return func(c *Client) { c.timerWake = max(period, 0) }
}

// Client is safe for concurrent use.
type Client struct {
	cfg      *config.Config
	log      *slog.Logger
	producer *producer.Producer
	// consumerErr says why no consumer can run, when one cannot.
	consumerErr error

	mu     sync.Mutex
	closed bool
	// session is the client's one Cassandra session, opened by the first
	// subscribe outside mock mode and shared by everything that needs it.
	session  *cassandra.Session
	consumer *consumer.Consumer
	timeouts *middleware.Timeouts
	// broadcast carries the consumer's handler telemetry (with its clock).
	broadcast *telemetry.Broadcast
	// scheduler is the subscription's scheduler, which tests count
	// permits of; it stays after Unsubscribe.
	scheduler atomic.Pointer[middleware.Scheduler]
	probe     *probe.Server
	// live is consumer, for the queries (ConsumerState, partition count,
	// stalled) that must not wait for mu: Subscribe holds it while it
	// connects to Kafka and Cassandra, which can take minutes.
	live atomic.Pointer[consumer.Consumer]
	// keyed is the client's keyed state once a subscribe needed it (nil
	// without state collections); it outlives subscriptions.
	keyed *keyedState
	// readers serve published-state readers, opened by the first Reader.
	readers *state.Readers
	// dedup skips messages handled before (pipeline mode), made by the
	// first subscribe; its cache outlives subscriptions.
	dedup *dedup.Deduplicator
	// emitter writes the telemetry topic; nil when telemetry is off.
	emitter *emitter.Emitter
	// unwatch ends the emitter's and the metrics' subscriptions to the
	// broadcast.
	unwatch func()
	// deadLettersSent counts the records written to the failure topic.
	deadLettersSent atomic.Int64
	// timerWake is WithPreciseTimers' period; 0: off.
	timerWake time.Duration
}

// New builds a client from a validated configuration. The producer connects
// in the background, so New does no network I/O; a consumer configuration
// problem does not fail New (a producer-only client is fine) but is reported
// by Subscribe and ConsumerState.
func New(cfg *config.Config, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg}
	for _, o := range opts {
		o(c)
	}
	if c.log == nil {
		l, err := logging.New(cfg.Log, os.Stderr)
		if err != nil {
			return nil, err
		}
		c.log = l
	}
	tracing.Setup(c.log)
	if cfg.ConsumerConfigured() {
		c.consumerErr = cfg.ValidateConsumer()
	} else {
		c.consumerErr = errors.New("no consumer configured: set group_id and subscribed_topics to subscribe")
	}
	if err := cfg.ValidateProducer(); err == nil {
		p, err := producer.New(producer.Options{
			Brokers:              cfg.BootstrapServers,
			Mock:                 cfg.Mock,
			SourceSystem:         cfg.SourceSystemOrGroup(),
			SendTimeout:          cfg.SendTimeout.Or(0),
			IdempotenceCacheSize: cfg.IdempotenceCacheSize,
			Security:             kafkasec.FromConfig(cfg),
		})
		if err != nil {
			return nil, fmt.Errorf("creating producer: %w", err)
		}
		c.producer = p
	}
	if err := c.startEmitter(); err != nil {
		if c.producer != nil {
			_ = c.producer.Close()
		}
		return nil, err
	}
	return c, nil
}

// SourceSystem is the value of the source-system header on sent records:
// source_system, or the group id when that is not set.
func (c *Client) SourceSystem() string { return c.cfg.SourceSystemOrGroup() }

// Send writes payload (one JSON document) under key to topic and waits for
// the broker to acknowledge it, bounded by ctx and send_timeout.
func (c *Client) Send(ctx context.Context, topic, key string, payload []byte) error {
	s, err := c.BeginSend(ctx, topic, key, payload)
	if err != nil {
		return err
	}
	_, err = s.Wait()
	return err
}

// BeginSend hands a record to the producer and returns before the broker
// acknowledges it; Wait on the result for the outcome. Records begun one
// after another are written in that order (per partition), so a host that
// starts many sends without awaiting each keeps its call order.
func (c *Client) BeginSend(ctx context.Context, topic, key string, payload []byte) (*producer.Sending, error) {
	if c.producer == nil {
		return nil, fmt.Errorf("source_system: sending needs source_system or group_id to be set")
	}
	return c.producer.Begin(ctx, topic, key, payload)
}

// ConsumerState reports the consumer's state, or why it cannot run.
func (c *Client) ConsumerState() (State, error) {
	if c.consumerErr != nil {
		if c.cfg.ConsumerConfigured() {
			return "", fmt.Errorf("consumer configuration failed: %w", c.consumerErr)
		}
		return Unconfigured, nil
	}
	if c.live.Load() != nil {
		return Running, nil
	}
	return Configured, nil
}

// Subscribe starts consuming with h. It fails when no consumer can be
// configured, when already subscribed, or when the client is closed. The
// probe server, if enabled and not in mock mode, starts here.
func (c *Client) Subscribe(h event.Handler) error {
	if c.consumerErr != nil {
		return fmt.Errorf("cannot subscribe: %w", c.consumerErr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.consumer != nil:
		return ErrAlreadySubscribed
	}
	topics, err := c.subscriptionTopics()
	if err != nil {
		return err
	}
	if c.cfg.Mode == config.ModeLowLatency && c.producer == nil {
		// Cannot happen with a validated consumer configuration (it has a
		// group id, the producer's source system); said plainly if it does.
		return errors.New("mode: low-latency mode writes failures to failure_topic and needs the producer, which is not configured")
	}
	store, err := c.timerStoreLocked()
	if err != nil {
		return err
	}
	deferral, err := c.deferralLocked()
	if err != nil {
		return err
	}
	keyed, err := c.keyedStateLocked()
	if err != nil {
		return err
	}
	deduplicator, err := c.dedupLocked()
	if err != nil {
		return err
	}
	timeouts := middleware.NewTimeouts(c.cfg.HandlerTimeout())
	broadcast := telemetry.NewBroadcast()
	var watches []func()
	if c.emitter != nil {
		watches = append(watches, broadcast.Subscribe(c.emitter))
	}
	port, probing := c.cfg.ProbePort.Get()
	probing = probing && !c.cfg.Mock
	var mets *metrics.Metrics
	if probing {
		mets = c.newMetrics(deduplicator)
		watches = append(watches, broadcast.Subscribe(mets.Observer()))
	}
	unwatch := func() {
		for _, w := range watches {
			w()
		}
	}
	sched := middleware.SchedulerOf(c.cfg, broadcast.Now)
	stacks := middleware.ModeStacks(c.cfg, h, middleware.Services{
		Scheduler:   sched,
		Timeouts:    timeouts,
		DeadLetters: deadLetters{p: c.producer, sent: &c.deadLettersSent},
		Logger:      c.log,
		Broadcast:   broadcast,
		KeyedState:  keyed != nil,
		Dedup:       deduplicator,
		Spans:       tracing.Recording(),
	})
	cons, err := consumer.Start(consumer.Options{
		Brokers:         c.cfg.BootstrapServers,
		Mock:            c.cfg.Mock,
		Security:        kafkasec.FromConfig(c.cfg),
		GroupID:         c.cfg.GroupID,
		Topics:          topics,
		AllowedEvents:   c.cfg.AllowedEvents,
		MaxUncommitted:  c.cfg.MaxUncommitted,
		PollInterval:    c.cfg.PollInterval,
		CommitInterval:  c.cfg.CommitInterval,
		ShutdownTimeout: c.cfg.ShutdownTimeout,
		StallThreshold:  c.cfg.StallThreshold,
		Timers:          store,
		SlabSize:        c.cfg.SlabSize,
		Deferral:        deferral,
		State:           keyed.service(),
		Stacks:          stacks,
		Scheduler:       sched,
		Broadcast:       broadcast,
		MessageSpans:    middleware.Relation(c.cfg.MessageSpans),
		Logger:          c.log,
	})
	if err != nil {
		timeouts.Stop()
		broadcast.Close()
		unwatch()
		return fmt.Errorf("starting consumer: %w", err)
	}
	if probing {
		mets.Attach(cons)
		srv, err := probe.Start(port, probe.Handler(cons, mets.Handler()), c.log)
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout+10*time.Second)
			defer cancel()
			_ = cons.Stop(ctx)
			timeouts.Stop()
			broadcast.Close()
			unwatch()
			return fmt.Errorf("probe_port: starting the probe server on port %d: %w", port, err)
		}
		c.probe = srv
	}
	if c.timerWake > 0 {
		waker := timerwake.Start(c.timerWake, func() bool { return sched.InUse() > 0 })
		stopWatching := unwatch
		unwatch = func() { waker.Stop(); stopWatching() }
	}
	c.consumer, c.timeouts, c.broadcast, c.unwatch = cons, timeouts, broadcast, unwatch
	c.live.Store(cons)
	c.scheduler.Store(sched)
	keyed.startRecovery(c.cfg)
	return nil
}

// Unsubscribe stops consuming the way a revocation does (in-flight
// handlers finish within shutdown_timeout, final offsets are committed) and
// stops the probe server. The client may subscribe again afterwards.
func (c *Client) Unsubscribe(ctx context.Context) error {
	c.mu.Lock()
	cons, timeouts, broadcast, srv, dd, unwatch := c.consumer, c.timeouts, c.broadcast, c.probe, c.dedup, c.unwatch
	c.consumer, c.timeouts, c.broadcast, c.probe, c.unwatch = nil, nil, nil, nil, nil
	c.live.Store(nil)
	c.mu.Unlock()
	if cons == nil {
		return ErrNotSubscribed
	}
	var errs []error
	if srv != nil {
		if err := srv.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping probe server: %w", err))
		}
	}
	if err := cons.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	if dd != nil {
		// Each partition waited for its own ids before its final commit;
		// this is for any write still under way after that wait ran out.
		if err := dd.Flush(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if unwatch != nil {
		unwatch()
	}
	c.flushTelemetry(ctx)
	timeouts.Stop()
	broadcast.Close()
	c.mu.Lock()
	c.keyed.stopRecovery()
	c.mu.Unlock()
	return errors.Join(errs...)
}

// AssignedPartitionCount is the number of partitions the consumer owns; 0
// unless subscribed.
func (c *Client) AssignedPartitionCount() int {
	if cons := c.live.Load(); cons != nil {
		return cons.AssignedPartitions()
	}
	return 0
}

// IsStalled reports whether a partition has made no progress for
// stall_threshold; false unless subscribed.
func (c *Client) IsStalled() bool {
	cons := c.live.Load()
	return cons != nil && cons.Stalled()
}

// ProbeAddr is the probe server's listening address, or "" when it is not
// running.
func (c *Client) ProbeAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.probe == nil {
		return ""
	}
	return c.probe.Addr()
}

// Close unsubscribes if needed and closes the producer. The client cannot
// be used afterwards.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	running := c.consumer != nil
	c.mu.Unlock()
	var errs []error
	if running {
		if err := c.Unsubscribe(ctx); err != nil && !errors.Is(err, ErrNotSubscribed) {
			errs = append(errs, err)
		}
	}
	if c.producer != nil {
		if err := c.producer.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	// After the producer: its last deliveries are telemetry too.
	c.closeEmitter(ctx)
	c.mu.Lock()
	c.keyed.release()
	c.keyed = nil
	if c.readers != nil {
		c.readers.Close()
		c.readers = nil
	}
	c.dedup = nil
	if c.session != nil {
		c.session.Close()
		c.session = nil
	}
	c.mu.Unlock()
	return errors.Join(errs...)
}
