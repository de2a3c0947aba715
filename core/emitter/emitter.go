// Package emitter is the telemetry emitter: it writes what happens inside a
// client (messages dispatched, succeeded, failed; timers scheduled,
// cancelled, dispatched, succeeded, failed; records sent) to the telemetry
// topic as JSON documents, one record per event, keyed by the event's key.
//
// It never holds a handler back. Observe only queues the event (a bounded
// buffer; once full, events are dropped, counted and reported in a
// warning); a goroutine of the emitter's own serialises the queue and
// hands it to a producer of its own, which batches for up to a second and
// writes with acks=1, no idempotence and LZ4 compression, as the original's
// emitter does. While Kafka is unreachable the emitter keeps trying to
// connect, and what does not fit in the buffer meanwhile is dropped.
package emitter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/mockbroker"
	"github.com/prosody-events/prosody-go/core/producer"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// DefaultCapacity is the default room of the buffer in front of Kafka, the
// number of sends the original lets run at once.
const DefaultCapacity = 32768

// Options configure an Emitter.
type Options struct {
	Brokers  []string
	Security kafkasec.Settings
	// Topic is the telemetry topic. Required.
	Topic string
	// Group is the source of consumer events (the consumer group id);
	// SourceSystem the source of sent records (the producer's).
	Group, SourceSystem string
	// Capacity is the room of the buffer; DefaultCapacity when 0.
	Capacity int
	Logger   *slog.Logger
}

// Stats count what became of the events offered to an emitter.
type Stats struct {
	Accepted  uint64 // queued
	Dropped   uint64 // refused: the buffer was full, or the emitter closed before it could send them
	Delivered uint64 // acknowledged by Kafka
	Failed    uint64 // refused by Kafka after the producer's retries
}

// Emitter is safe for concurrent use.
type Emitter struct {
	opts Options
	id   identity
	log  *slog.Logger
	buf  *queue

	accepted, dropped, delivered, failed atomic.Uint64
	// stopped: Close has begun; what is observed from then on is dropped.
	stopped atomic.Bool
	// connected is closed once the emitter has reached Kafka: flushes
	// wait for it, so none is held while Kafka is out of reach.
	connected chan struct{}

	flushes chan chan error
	stop    chan struct{}
	// abort ends the last sends of a Close whose deadline passed.
	abort     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	abortOnce sync.Once
}

// Timing of the connection attempts and of the warnings.
const (
	dialBackoffMin = 100 * time.Millisecond
	dialBackoffMax = 5 * time.Second
	warnInterval   = 10 * time.Second
)

// ErrNotConnected is wrapped by the error of a Flush whose context ended
// before the emitter reached Kafka.
var ErrNotConnected = errors.New("telemetry: the emitter has not connected to Kafka yet")

// New starts an emitter. It does not wait for Kafka.
func New(opts Options) (*Emitter, error) {
	if opts.Topic == "" {
		return nil, errors.New("telemetry_topic: the emitter needs a topic")
	}
	if len(opts.Brokers) == 0 {
		return nil, errors.New("bootstrap_servers: the emitter needs at least one broker")
	}
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultCapacity
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cfg, err := saramaConfig(opts)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	e := &Emitter{
		opts:    opts,
		id:      identity{group: opts.Group, sourceSystem: opts.SourceSystem, hostname: host},
		log:     opts.Logger,
		buf:     newQueue(opts.Capacity),
		flushes: make(chan chan error),
		stop:    make(chan struct{}),
		abort:   make(chan struct{}),
		done:    make(chan struct{}),
		// closed by run once it reaches Kafka
		connected: make(chan struct{}),
	}
	register(e)
	go e.run(cfg)
	return e, nil
}

// saramaConfig is the original emitter's producer settings, translated.
func saramaConfig(opts Options) (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	if h, err := os.Hostname(); err == nil && h != "" {
		cfg.ClientID = h
	}
	cfg.Producer.RequiredAcks = sarama.WaitForLocal
	cfg.Producer.Idempotent = false
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.Partitioner = producer.NewPartitioner
	// linger.ms=1000; sarama bounds a batch by MaxMessageBytes (1 MB)
	// where librdkafka's batch.size is 4 MB.
	cfg.Producer.Flush.Frequency = time.Second
	cfg.Producer.Flush.Bytes = cfg.Producer.MaxMessageBytes
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.ChannelBufferSize = 4096
	cfg.Metadata.Full = false
	if err := opts.Security.Apply(cfg); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("telemetry: invalid kafka configuration: %w", err)
	}
	return cfg, nil
}

// Observe implements telemetry.Observer: it queues e, or drops it when the
// buffer is full or the emitter is closing. It never blocks.
func (e *Emitter) Observe(ev telemetry.Event) {
	if ev.Subject == nil {
		return
	}
	if e.stopped.Load() || e.buf.full() {
		e.dropped.Add(1) // and no copy made for nothing
		return
	}
	if r, ok := recordOf(ev); ok {
		e.enqueue(r)
	}
}

func (e *Emitter) enqueue(r record) {
	if e.buf.push(r) {
		e.accepted.Add(1)
	} else {
		e.dropped.Add(1)
	}
}

// Sent is the producer's observer (producer.Producer.OnDelivered): it
// queues the prosody.message.sent event of d.
func (e *Emitter) Sent(d producer.Delivered) {
	if e.stopped.Load() {
		e.dropped.Add(1)
		return
	}
	e.enqueue(record{kind: sentRecord, name: MessageSent, at: telemetry.Now(), topic: d.Topic, partition: d.Partition,
		offset: d.Offset, key: d.Key, trace: tracing.Fields{TraceParent: d.TraceParent, TraceState: d.TraceState}})
}

// Stats returns the emitter's counts.
func (e *Emitter) Stats() Stats {
	return Stats{Accepted: e.accepted.Load(), Dropped: e.dropped.Load(), Delivered: e.delivered.Load(), Failed: e.failed.Load()}
}

// Flush returns once every event queued before the call has been
// acknowledged by Kafka or refused by it, or when ctx is done. It does not
// wait for the producer's linger: the batches under way are sent at once.
// Before the emitter has reached Kafka, the flush waits for it too.
func (e *Emitter) Flush(ctx context.Context) error {
	select {
	case <-e.connected:
	case <-e.done:
		return nil
	case <-ctx.Done():
		return e.flushEnded(ctx)
	}
	reply := make(chan error, 1)
	select {
	case e.flushes <- reply:
	case <-e.done:
		return nil
	case <-ctx.Done():
		return e.flushEnded(ctx)
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return e.flushEnded(ctx)
	}
}

// flushEnded is the error of a flush whose context ended first.
func (e *Emitter) flushEnded(ctx context.Context) error {
	select {
	case <-e.connected:
	default:
		return fmt.Errorf("%w (%d events wait): %w", ErrNotConnected, e.buf.len(), ctx.Err())
	}
	return fmt.Errorf("telemetry: flushing: %w", ctx.Err())
}

// Close sends what is queued, waits for its acknowledgements (or ctx),
// and stops the emitter. Events observed afterwards are dropped, and so
// is what is still queued when ctx ends.
func (e *Emitter) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		unregister(e)
		e.stopped.Store(true)
		close(e.stop)
	})
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		e.abortOnce.Do(func() { close(e.abort) })
		return fmt.Errorf("telemetry: closing the emitter: %w", ctx.Err())
	}
}

// run is the emitter's goroutine.
func (e *Emitter) run(cfg *sarama.Config) {
	defer close(e.done)
	warnings := time.NewTicker(warnInterval)
	defer warnings.Stop()
	var lastDropped uint64
	warnDrops := func() {
		if d := e.dropped.Load(); d != lastDropped {
			e.log.Warn("telemetry events dropped: the emitter could not keep up or reach Kafka",
				slog.Uint64("dropped", d-lastDropped), slog.Uint64("dropped_total", d), slog.String("topic", e.opts.Topic))
			lastDropped = d
		}
	}
	defer warnDrops()

	client := e.connect(cfg, warnings.C, warnDrops)
	if client == nil {
		e.dropped.Add(uint64(e.buf.clear()))
		return
	}
	close(e.connected)
	defer func() { _ = client.Close() }()
	p, err := e.startProducer(client)
	if err != nil {
		e.log.Error("telemetry: starting the emitter's producer failed; telemetry is off", slog.Any("error", err))
		e.discard()
		return
	}
	for {
		select {
		case <-e.buf.ready:
			// What waits now, and no more: a flush or a stop must not
			// wait behind a steady stream of new events.
			if !e.sendQueued(p) {
				e.dropped.Add(uint64(e.buf.clear()))
				p.close()
				return
			}
		case reply := <-e.flushes:
			if !e.sendQueued(p) {
				e.dropped.Add(uint64(e.buf.clear()))
				p.close()
				reply <- nil
				return
			}
			p.close()
			if p, err = e.startProducer(client); err != nil {
				reply <- err
				e.log.Error("telemetry: restarting the emitter's producer failed; telemetry is off", slog.Any("error", err))
				e.discard()
				return
			}
			reply <- nil
		case <-warnings.C:
			warnDrops()
		case <-e.stop:
			if !e.sendQueued(p) {
				e.dropped.Add(uint64(e.buf.clear()))
			}
			p.close()
			return
		}
	}
}

// connect dials until it reaches Kafka; nil when the emitter stops first.
func (e *Emitter) connect(cfg *sarama.Config, warnings <-chan time.Time, warnDrops func()) sarama.Client {
	backoff := dialBackoffMin
	var lastWarn time.Time
	for {
		client, ok, err := e.dial(cfg, warnings, warnDrops)
		if !ok {
			return nil
		}
		if err == nil {
			return client
		}
		if time.Since(lastWarn) >= warnInterval {
			e.log.Warn("telemetry: the emitter cannot reach Kafka; retrying", slog.Any("error", e.opts.Security.Explain(err)))
			lastWarn = time.Now()
		}
		t := time.NewTimer(backoff)
		for waiting := true; waiting; {
			select {
			case <-t.C:
				waiting = false
			case <-warnings:
				warnDrops()
			case <-e.stop:
				t.Stop()
				return nil
			}
		}
		backoff = min(2*backoff, dialBackoffMax)
	}
}

// dial makes one attempt to reach Kafka; ok is false when the emitter
// stopped first. A broker that accepts the
// connection and never answers holds a metadata request for sarama's
// network timeouts, which stopping does not wait for.
func (e *Emitter) dial(cfg *sarama.Config, warnings <-chan time.Time, warnDrops func()) (sarama.Client, bool, error) {
	client, err := sarama.NewClient(e.opts.Brokers, cfg)
	if err != nil {
		return nil, true, err
	}
	refreshed := make(chan error, 1)
	go func() { refreshed <- client.RefreshMetadata(e.opts.Topic) }()
	for {
		select {
		case err := <-refreshed:
			if err != nil {
				_ = client.Close()
				return nil, true, err
			}
			return client, true, nil
		case <-warnings:
			warnDrops()
		case <-e.stop:
			// sarama cannot abandon a request under way: the attempt
			// ends on its own, within the client's network timeouts,
			// and closes its client then.
			go func() {
				<-refreshed
				_ = client.Close()
			}()
			return nil, false, nil
		}
	}
}

// discard drops what is queued and what comes until the emitter stops.
func (e *Emitter) discard() {
	for {
		select {
		case <-e.buf.ready:
			e.dropped.Add(uint64(e.buf.clear()))
		case reply := <-e.flushes:
			reply <- nil
		case <-e.stop:
			e.dropped.Add(uint64(e.buf.clear()))
			return
		}
	}
}

// sendQueued sends what the buffer holds now; false when a Close ran out
// of time while a send waited.
func (e *Emitter) sendQueued(p *running) bool {
	for n := e.buf.len(); n > 0; n-- {
		r, ok := e.buf.pop()
		if !ok {
			break
		}
		if !e.send(p, r) {
			return false
		}
	}
	if e.buf.len() > 0 {
		e.buf.signal()
	}
	return true
}

// send hands r's document to the producer; false when a Close ran out of
// time while sarama's intake was full.
func (e *Emitter) send(p *running, r record) bool {
	value := e.id.appendRecord(make([]byte, 0, 320), r)
	msg := &sarama.ProducerMessage{Topic: e.opts.Topic, Key: sarama.StringEncoder(r.key), Value: sarama.ByteEncoder(value)}
	select {
	case p.producer.Input() <- msg:
		return true
	case <-e.abort:
		e.dropped.Add(1)
		return false
	}
}

// running is a producer and the goroutines reading its reports.
type running struct {
	producer sarama.AsyncProducer
	reports  sync.WaitGroup
}

func (e *Emitter) startProducer(client sarama.Client) (*running, error) {
	ap, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("telemetry: starting the producer: %w", err)
	}
	p := &running{producer: ap}
	p.reports.Add(2)
	go func() {
		defer p.reports.Done()
		for range ap.Successes() {
			e.delivered.Add(1)
		}
	}()
	go func() {
		defer p.reports.Done()
		var lastWarn time.Time
		var since uint64
		for perr := range ap.Errors() {
			e.failed.Add(1)
			since++
			if time.Since(lastWarn) >= warnInterval {
				e.log.Warn("telemetry: Kafka refused telemetry events", slog.Uint64("refused", since),
					slog.String("topic", e.opts.Topic), slog.Any("error", e.opts.Security.Explain(perr.Err)))
				lastWarn, since = time.Now(), 0
			}
		}
	}()
	return p, nil
}

// close sends the producer's batches at once and waits for their reports.
func (p *running) close() {
	p.producer.AsyncClose()
	p.reports.Wait()
}

// The emitters alive in the process, for FlushAll.
var (
	liveMu sync.Mutex
	live   = map[*Emitter]struct{}{}
)

func register(e *Emitter) {
	liveMu.Lock()
	live[e] = struct{}{}
	liveMu.Unlock()
}

func unregister(e *Emitter) {
	liveMu.Lock()
	delete(live, e)
	liveMu.Unlock()
}

// FlushAll flushes every emitter of the process (the bindings'
// flushTelemetry).
func FlushAll(ctx context.Context) error {
	liveMu.Lock()
	all := make([]*Emitter, 0, len(live))
	for e := range live {
		all = append(all, e)
	}
	liveMu.Unlock()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Flush(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
