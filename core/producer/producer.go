package producer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/kafkafault"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/mockbroker"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// Producer sends records to Kafka. It is safe for concurrent use. Create it
// with New and release it with Close.
type Producer struct {
	sourceSystemValue []byte
	sendTimeout       time.Duration
	cache             *idCache // nil when the id cache is disabled
	maxMsgBytes       int

	// Connecting happens in the background (see connect), so that a
	// producer can be built while Kafka is still unreachable, as with
	// librdkafka. conn is written once, before ready is closed, and is
	// read only after ready is closed or connectDone is.
	ready       chan struct{}
	connectDone chan struct{}
	conn        *connection
	lastDialErr atomic.Pointer[error]
	// failed is closed at the first dial the broker refused for its
	// credentials or TLS handshake (a kafkasec.AuthError); authErr is the
	// latest such refusal, nil again once a dial succeeds. While it is
	// set, sends fail at once instead of waiting out their timeout. The
	// dial goes on, slowly (authRetry): a renewed token file, a password
	// that reached every broker, or a replaced certificate lets it in.
	failed  chan struct{}
	authErr atomic.Pointer[error]
	// failedOnce: failed is closed; only connect reads and writes it.
	failedOnce bool
	security   kafkasec.Settings

	// closing is closed when Close starts; it wakes sends that are
	// waiting to connect or to hand a record to sarama. mu orders those
	// hand-offs before sarama's AsyncClose: Send holds it shared while
	// writing to Input, Close holds it exclusively to set closed. Writing
	// to Input after AsyncClose could panic on a closed channel.
	closing chan struct{}
	mu      sync.RWMutex
	closed  bool

	closeOnce sync.Once
	closeErr  error

	// delivered is the observer of acknowledged records (OnDelivered).
	delivered atomic.Pointer[func(Delivered)]
}

// Delivered is a record Kafka acknowledged, as an observer of sends
// (OnDelivered) sees it.
type Delivered struct {
	Topic, Key string
	Partition  int32
	Offset     int64
	// TraceParent and TraceState are the record's trace headers; both
	// empty when it carried no trace context.
	TraceParent, TraceState string
}

// OnDelivered makes fn the observer of every record Kafka acknowledges
// from now on (nil: none). fn runs on the goroutine that routes delivery
// reports and must not block.
func (p *Producer) OnDelivered(fn func(Delivered)) {
	if fn == nil {
		p.delivered.Store(nil)
		return
	}
	p.delivered.Store(&fn)
}

// connection is a live sarama producer and the client it runs on.
type connection struct {
	client   sarama.Client
	producer sarama.AsyncProducer
	drained  sync.WaitGroup // the two delivery-report goroutines
	// delivered is the producer's observer of acknowledged records.
	delivered *atomic.Pointer[func(Delivered)]
}

// New validates opts and returns a producer. It does not wait for Kafka:
// the connection is made in the background and retried until it succeeds
// or Close is called, and sends wait for it within their timeout.
//
// In mock mode the producer uses the shared in-memory cluster and never
// dials opts.Brokers.
//
// Invalid options are a terminal error (fault.ClassTerminal): no producer
// can be built from them, however often New is retried. Failing to start
// the mock cluster is transient.
func New(opts Options) (*Producer, error) {
	if err := opts.validate(); err != nil {
		return nil, fault.Terminal(err)
	}
	cfg, err := opts.saramaConfig()
	if err != nil {
		return nil, fault.Terminal(err)
	}
	addrs := opts.Brokers
	if opts.Mock {
		cluster, err := mockbroker.Shared()
		if err != nil {
			return nil, fault.Transient(fmt.Errorf("producer: start mock cluster: %w", err))
		}
		addrs = cluster.Addrs()
	}

	p := &Producer{
		sourceSystemValue: []byte(opts.SourceSystem),
		sendTimeout:       opts.SendTimeout,
		cache:             newIDCache(opts.IdempotenceCacheSize),
		maxMsgBytes:       cfg.Producer.MaxMessageBytes,
		ready:             make(chan struct{}),
		connectDone:       make(chan struct{}),
		failed:            make(chan struct{}),
		security:          opts.Security,
		closing:           make(chan struct{}),
	}
	go p.connect(addrs, cfg)
	return p, nil
}

// Reconnect pacing while Kafka is unreachable. Each attempt already spends
// sarama's own metadata retries (about a second when connections are
// refused), so this only keeps a long outage from spinning.
const (
	dialBackoffMin = 100 * time.Millisecond
	dialBackoffMax = 5 * time.Second
)

// authRetry paces dials after the broker refused the credentials or the
// handshake: each one is a refused login in the broker's log. A variable
// for the test that renews a refused token.
var authRetry = 30 * time.Second

// connect dials until a sarama producer is up or Close starts.
func (p *Producer) connect(addrs []string, cfg *sarama.Config) {
	defer close(p.connectDone)
	backoff := dialBackoffMin
	for {
		c, err := dial(addrs, cfg, &p.delivered)
		if err == nil {
			p.conn = c
			close(p.ready)
			p.authErr.Store(nil)
			return
		}
		err = p.security.Explain(err)
		p.lastDialErr.Store(&err)
		wait := backoff
		if kafkasec.IsAuthError(err) {
			first := p.authErr.Swap(&err) == nil && !p.failedOnce
			if first {
				p.failedOnce = true
				close(p.failed)
			}
			wait = authRetry
		}
		t := time.NewTimer(wait)
		select {
		case <-p.closing:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, dialBackoffMax)
	}
}

// dial opens a client and an idempotent producer on it and starts the
// goroutines that route delivery reports back to senders.
func dial(addrs []string, cfg *sarama.Config, delivered *atomic.Pointer[func(Delivered)]) (*connection, error) {
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %v: %w", addrs, err)
	}
	// With Metadata.Full off, NewClient does not talk to the cluster. One
	// metadata round trip checks reachability with sarama's short metadata
	// retries; otherwise the producer-id request below would find out
	// through its own, much longer, retry loop, and Close would wait for it.
	if err := client.RefreshMetadata(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("connect to %v: %w", addrs, err)
	}
	// Built from a client we own, because sarama.NewAsyncProducer leaks
	// its internal client when producer setup (the producer id request)
	// fails.
	ap, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("start idempotent producer on %v: %w", addrs, err)
	}
	c := &connection{client: client, producer: ap, delivered: delivered}
	c.drained.Add(2)
	go c.routeSuccesses()
	go c.routeErrors()
	return c, nil
}

// routeSuccesses hands each success report to the send waiting for it. The
// loop ends when sarama closes the channel after AsyncClose.
func (c *connection) routeSuccesses() {
	defer c.drained.Done()
	for msg := range c.producer.Successes() {
		if f, ok := msg.Metadata.(*flight); ok {
			f.done <- outcome{partition: msg.Partition, offset: msg.Offset}
		}
		if fn := c.delivered.Load(); fn != nil {
			(*fn)(deliveredOf(msg))
		}
	}
}

func deliveredOf(msg *sarama.ProducerMessage) Delivered {
	d := Delivered{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}
	if msg.Key != nil {
		if k, err := msg.Key.Encode(); err == nil {
			d.Key = string(k)
		}
	}
	for _, h := range msg.Headers {
		switch string(h.Key) {
		case tracing.TraceParent:
			d.TraceParent = string(h.Value)
		case tracing.TraceState:
			d.TraceState = string(h.Value)
		}
	}
	return d
}

// routeErrors is routeSuccesses for failure reports.
func (c *connection) routeErrors() {
	defer c.drained.Done()
	for perr := range c.producer.Errors() {
		if f, ok := perr.Msg.Metadata.(*flight); ok {
			f.done <- outcome{err: perr.Err}
		}
	}
}

// Close stops accepting sends and waits until every record already handed
// to Kafka has its delivery report, so no accepted send is left without an
// answer. While the cluster is unreachable that can take as long as sarama's
// delivery budget (about five minutes). Sends that have not yet handed their
// record over fail with ErrClosed.
//
// Close is safe to call more than once and concurrently; every call returns
// the first call's result. A failure to close the Kafka client is classified
// like a failed delivery (see kafkafault.Class); the producer is closed regardless.
func (p *Producer) Close() error {
	p.closeOnce.Do(func() {
		close(p.closing)
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()

		<-p.connectDone
		c := p.conn
		if c == nil {
			return
		}
		c.producer.AsyncClose()
		c.drained.Wait()
		if err := c.client.Close(); err != nil && !errors.Is(err, sarama.ErrClosedClient) {
			p.closeErr = kafkafault.Mark(fmt.Errorf("producer: close kafka client: %w", err))
		}
	})
	return p.closeErr
}

// dialError returns the latest connection failure, or nil.
func (p *Producer) dialError() error {
	if e := p.lastDialErr.Load(); e != nil {
		return *e
	}
	return nil
}
