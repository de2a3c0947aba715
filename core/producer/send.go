package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/kafkafault"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// SourceSystemHeader is the name of the header carrying the producer's
// source system. Consumers skip records whose value equals their group id.
const SourceSystemHeader = "source-system"

var sourceSystemKey = []byte(SourceSystemHeader)

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Delivery describes where a record was written.
type Delivery struct {
	// Partition and Offset locate the record. Both are -1 when Skipped.
	Partition int32
	Offset    int64
	// Skipped is true when the send was dropped because the same event id
	// was already delivered for this topic and key (the id cache). Nothing
	// was written; the call still succeeds.
	Skipped bool
}

// skipped is the Delivery of a send the id cache dropped.
var skipped = Delivery{Partition: -1, Offset: -1, Skipped: true}

// flight is one record on its way to Kafka. It travels in the record's
// Metadata so the delivery-report goroutines can find the waiting Send.
type flight struct {
	// done has room for the one report, so the router never blocks even
	// when the sender has given up waiting.
	done chan outcome
}

type outcome struct {
	partition int32
	offset    int64
	err       error
}

// Send writes one record and waits for Kafka to acknowledge it.
//
// payload is the record value: exactly one JSON document (core-behavior.md
// §8). It is validated before anything else happens; a nil payload, an empty
// one, or anything that is not a single JSON document fails at once with a
// permanent error that wraps payload.ErrNull or payload.ErrInvalid, and
// nothing is sent.
//
// When the id cache is enabled and payload is an object whose top-level "id"
// is a JSON string, a send whose (topic, key, id) was already delivered
// returns a Skipped Delivery without writing anything; the triple is
// remembered only after a successful delivery. Any other "id" (a number,
// null, a nested one, a key spelt "ID") does not count.
//
// The record carries the source-system header first, then headers in order,
// and a timestamp of now. An empty key is written as an empty (not null) key
// and goes to a random partition.
//
// sarama reads payload and the header values until the record is delivered,
// which after a timeout can be later than Send's return: do not modify them
// once they are passed in.
//
// Send returns when the delivery report arrives, when ctx is done, or when
// Options.SendTimeout expires, whichever is first. On timeout the error
// wraps ErrSendTimeout and is transient. After a timeout or a cancelled ctx
// the record may still be delivered, so a retry can write it twice; that is
// the at-least-once contract consumers already handle.
//
// Every error classifies through fault.ClassOf: invalid arguments (empty
// topic, invalid payload, a record over the size limit) are permanent;
// ErrClosed is terminal; a failed delivery is classified by its Kafka error
// (see kafkafault.Class); timeouts and context errors are transient. errors.Is
// finds ErrClosed, ErrSendTimeout, context errors and sarama's errors
// through the marks.
//
// The id cache drops only sends that start after an earlier send of the same
// triple succeeded: two concurrent sends of one event may both be written,
// as in the original.
func (p *Producer) Send(ctx context.Context, topic, key string, payload []byte, headers ...Header) (Delivery, error) {
	s, err := p.Begin(ctx, topic, key, payload, headers...)
	if err != nil {
		return Delivery{}, err
	}
	return s.Wait()
}

// Sending is a record handed to sarama whose delivery report is still to
// come (see Begin).
type Sending struct {
	ctx      context.Context
	p        *Producer
	topic    string
	f        *flight // nil when the id cache skipped the record
	timer    *time.Timer
	timeout  <-chan time.Time
	cacheKey xxh3.Uint128
	useCache bool
	span     trace.Span // the send span, when the core's spans are recorded
}

// endSpan ends the send span with the send's outcome.
func (s *Sending) endSpan(d Delivery, err error) {
	if s.span == nil {
		return
	}
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	} else {
		s.span.SetAttributes(attribute.Int("partition", int(d.Partition)), attribute.Int64("offset", d.Offset))
	}
	s.span.End()
	s.span = nil
}

// Begin is the first half of Send: it validates the record and hands it
// to sarama, waiting only for the connection and sarama's intake, and
// returns before the delivery report. Records begun one after another
// from one goroutine are written in that order (within a partition), which
// concurrent Sends do not promise. Wait for the outcome with Wait; the
// send_timeout covers both halves.
func (p *Producer) Begin(ctx context.Context, topic, key string, payload []byte, headers ...Header) (*Sending, error) {
	if err := config.CheckTopicName(topic); err != nil {
		// Kafka would refuse it, or a host's C string would have cut it
		// short: refuse it here, naming it.
		return nil, fault.Permanent(fmt.Errorf("producer: send: %w", err))
	}
	fields, err := checkPayload(topic, payload)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("producer: send to %q: %w", topic, err)
	}

	s := &Sending{ctx: ctx, p: p, topic: topic}
	if p.cache != nil && fields.HasID {
		s.cacheKey, s.useCache = idKey(topic, key, fields.ID), true
		if p.cache.contains(s.cacheKey) {
			return s, nil // skipped: Wait reports success at once
		}
	}

	if tracing.Recording() {
		// The record carries the send span's context, so its consumers'
		// spans lead back to it.
		s.ctx, s.span = tracing.Tracer().Start(ctx, "send", trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.String("topic", topic), attribute.Int("payload_size", len(payload))))
	}
	s.f = &flight{done: make(chan outcome, 1)}
	msg := p.newMessage(s.ctx, topic, key, payload, headers, s.f)
	if s.span != nil {
		s.span.SetAttributes(attribute.Int64("timestamp", msg.Timestamp.UnixMilli()))
	}
	if err := s.hand(msg); err != nil {
		s.endSpan(Delivery{}, err)
		return nil, err
	}
	return s, nil
}

// hand gives msg, the record of s, to sarama: it checks its size, starts
// the send timeout and waits for the connection and sarama's intake.
func (s *Sending) hand(msg *sarama.ProducerMessage) error {
	p := s.p
	if size := msg.ByteSize(2); size > p.maxMsgBytes {
		// sarama would reject it with a ConfigurationError, which reads
		// as a client misconfiguration; it is this record that is too big.
		return kafkafault.Mark(fmt.Errorf("producer: send to %q: record of %d bytes exceeds %d: %w",
			s.topic, size, p.maxMsgBytes, sarama.ErrMessageSizeTooLarge))
	}
	// One timer covers the whole send: waiting for the connection, the
	// hand-off to sarama and the delivery report.
	if p.sendTimeout > 0 {
		s.timer = time.NewTimer(p.sendTimeout)
		s.timeout = s.timer.C
	}
	conn, err := p.awaitConnection(s.ctx, s.timeout, s.topic)
	if err == nil {
		err = p.enqueue(s.ctx, s.timeout, conn, msg)
	}
	if err != nil {
		s.stopTimer()
	}
	return err
}

func (s *Sending) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// Wait returns the outcome of a begun send, classified as Send's.
func (s *Sending) Wait() (d Delivery, err error) {
	defer func() { s.endSpan(d, err) }()
	return s.wait()
}

func (s *Sending) wait() (Delivery, error) {
	if s.f == nil {
		return skipped, nil
	}
	defer s.stopTimer()
	select {
	case o := <-s.f.done:
		if o.err != nil {
			return Delivery{}, kafkafault.Mark(fmt.Errorf("producer: send to %q: %w", s.topic, o.err))
		}
		if s.useCache {
			s.p.cache.add(s.cacheKey)
		}
		return Delivery{Partition: o.partition, Offset: o.offset}, nil
	case <-s.ctx.Done():
		return Delivery{}, fmt.Errorf("producer: send to %q: awaiting delivery report: %w", s.topic, s.ctx.Err())
	case <-s.timeout:
		return Delivery{}, fmt.Errorf("producer: send to %q: no delivery report within %s (the record may still be delivered): %w",
			s.topic, s.p.sendTimeout, ErrSendTimeout)
	}
}

// SendRaw writes key and value unchanged, without Send's checks of the
// payload and without the id cache, and waits for the acknowledgement as
// Send does. A nil key is written as a null key (a random partition), a
// nil value as a null value. It is for records that are not events of
// ours (the dead letter of an undecodable record).
func (p *Producer) SendRaw(ctx context.Context, topic string, key, value []byte, headers ...Header) (Delivery, error) {
	if err := config.CheckTopicName(topic); err != nil {
		return Delivery{}, fault.Permanent(fmt.Errorf("producer: send: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return Delivery{}, fmt.Errorf("producer: send to %q: %w", topic, err)
	}
	s := &Sending{ctx: ctx, p: p, topic: topic, f: &flight{done: make(chan outcome, 1)}}
	if err := s.hand(p.newRecord(ctx, topic, key, value, headers, s.f)); err != nil {
		return Delivery{}, err
	}
	return s.Wait()
}

// awaitConnection returns the live connection, waiting for the background
// dial if it has not succeeded yet.
func (p *Producer) awaitConnection(ctx context.Context, timeout <-chan time.Time, topic string) (*connection, error) {
	select {
	case <-p.ready:
		return p.conn, nil
	default:
	}
	if e := p.authErr.Load(); e != nil {
		return nil, p.refused(topic, *e)
	}
	select {
	case <-p.ready:
		return p.conn, nil
	case <-p.failed:
		select {
		case <-p.ready: // a later dial got in
			return p.conn, nil
		default:
		}
		// authErr is cleared only after ready closes: it is set here.
		if e := p.authErr.Load(); e != nil {
			return nil, p.refused(topic, *e)
		}
		return nil, p.refused(topic, p.dialError())
	case <-p.closing:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("producer: send to %q: not connected to kafka: %w", topic, ctx.Err())
	case <-timeout:
		reason := "still connecting"
		if err := p.dialError(); err != nil {
			reason = err.Error()
		}
		// The dial error is reported as text, not wrapped: whatever it
		// says, the send timed out and that is what callers classify.
		return nil, fmt.Errorf("producer: send to %q: not connected to kafka within %s (%s): %w",
			topic, p.sendTimeout, reason, ErrSendTimeout)
	}
}

// refused is a send's error while the broker refuses the producer's
// credentials or handshake: terminal for this send, which fails at once;
// the producer keeps trying to connect.
func (p *Producer) refused(topic string, err error) error {
	return fault.Terminal(fmt.Errorf("producer: send to %q: cannot connect to kafka: %w", topic, err))
}

// enqueue hands msg to sarama unless Close has started.
func (p *Producer) enqueue(ctx context.Context, timeout <-chan time.Time, conn *connection, msg *sarama.ProducerMessage) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	select {
	case conn.producer.Input() <- msg:
		return nil
	case <-p.closing:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("producer: send to %q: %w", msg.Topic, ctx.Err())
	case <-timeout:
		return fmt.Errorf("producer: send to %q: not accepted by the producer within %s: %w",
			msg.Topic, p.sendTimeout, ErrSendTimeout)
	}
}

// newMessage builds the sarama record for one send.
func (p *Producer) newMessage(ctx context.Context, topic, key string, payload []byte, headers []Header, f *flight) *sarama.ProducerMessage {
	// []byte of an empty string is non-nil, so an empty key stays empty
	// rather than null.
	return p.newRecord(ctx, topic, []byte(key), payload, headers, f)
}

// newRecord builds the sarama record for key and value bytes (nil: null).
func (p *Producer) newRecord(ctx context.Context, topic string, key, value []byte, headers []Header, f *flight) *sarama.ProducerMessage {
	trace := tracing.Inject(ctx)
	hs := make([]sarama.RecordHeader, 0, len(trace)+1+len(headers))
	// The trace headers come first, as the original writes them.
	for _, h := range trace {
		hs = append(hs, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	// The source-system bytes are shared by all records; sarama only
	// reads header bytes.
	hs = append(hs, sarama.RecordHeader{Key: sourceSystemKey, Value: p.sourceSystemValue})
	for _, h := range headers {
		hs = append(hs, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	msg := &sarama.ProducerMessage{
		Topic:     topic,
		Headers:   hs,
		Timestamp: time.Now(),
		Metadata:  f,
	}
	// ByteEncoders, not StringEncoders: the partitioner and the encoder
	// then share one copy of the key. A nil encoder is a null.
	if key != nil {
		msg.Key = sarama.ByteEncoder(key)
	}
	if value != nil {
		msg.Value = sarama.ByteEncoder(value)
	}
	return msg
}
