package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// DeadLetterSink writes dead letters: the client's producer.
type DeadLetterSink interface {
	// SendJSON writes a record whose value is one JSON document, as a
	// send of the client does (its trace headers from ctx, the
	// source-system header, the event-id cache), followed by headers. It
	// returns once the broker acknowledged the record.
	SendJSON(ctx context.Context, topic, key string, value []byte, headers []event.Header) error
	// SendRaw writes key and value unchanged (nil: a null key or value),
	// without the event-id cache, and otherwise as SendJSON.
	SendRaw(ctx context.Context, topic string, key, value []byte, headers []event.Header) error
}

// DeadLetter is the failure-topic layer of low-latency mode. A message
// whose attempts failed (retries spent, or a permanent failure) is written
// to the failure topic with its key, its payload and headers telling where
// it came from and why it failed; its outcome is then a success, so the
// offset is committed, and never before the broker acknowledged the
// record. A failed write is returned as transient, and the retry outside
// runs the whole stack again (the handler included), so the offset stays
// uncommitted until a write succeeds. Terminal failures pass through
// (the partition is going away), and so do timers: they are never
// dead-lettered.
//
// An Undecodable record (spec §1 (f)) is written with its key and value
// bytes unchanged.
type DeadLetter struct {
	topic, group string
	sink         DeadLetterSink
	log          *slog.Logger
	written      atomic.Int64
}

// NewDeadLetter returns the layer writing to topic for consumer group
// group through sink.
func NewDeadLetter(topic, group string, sink DeadLetterSink, log *slog.Logger) *DeadLetter {
	if log == nil {
		log = slog.Default()
	}
	return &DeadLetter{topic: topic, group: group, sink: sink, log: log}
}

// Written is how many dead letters the layer has written.
func (d *DeadLetter) Written() int64 { return d.written.Load() }

// Before implements Layer.
func (*DeadLetter) Before(*Run) Step { return Continue }

// After implements Layer.
func (d *DeadLetter) After(r *Run, err error) Step {
	if err == nil || fault.IsTerminal(err) {
		return Result(err)
	}
	switch r.ev.(type) {
	case *event.Message, *Undecodable:
	default:
		return Result(err)
	}
	// The write waits for the broker; the run waits without its permit,
	// and the thread that finished the attempt (a host's) is not held.
	go d.write(r, err)
	return Wait
}

func (d *DeadLetter) write(r *Run, cause error) {
	var src source
	var send func(ctx context.Context, headers []event.Header) error
	switch e := r.ev.(type) {
	case *event.Message:
		src = source{e.Topic, e.Partition, e.Offset, e.Timestamp, e.Headers}
		send = func(ctx context.Context, hs []event.Header) error {
			return d.sink.SendJSON(ctx, d.topic, e.Key, e.Payload, hs)
		}
	case *Undecodable:
		src = source{e.Topic, e.Partition, e.Offset, e.Timestamp, e.Headers}
		send = func(ctx context.Context, hs []event.Header) error {
			return d.sink.SendRaw(ctx, d.topic, e.Key, e.Value, hs)
		}
	}
	// The dead letter continues the trace of the record.
	err := send(tracing.FromHeaders(src.headers).Context(r.ctx), src.deadLetterHeaders(d.group, cause))
	attrs := []slog.Attr{slog.String("topic", src.topic), slog.Int("partition", int(src.partition)),
		slog.Int64("offset", src.offset), slog.String("key", r.ctx.Key()),
		slog.String("failure_topic", d.topic), slog.String("error", cause.Error())}
	if err != nil {
		msg := "writing the dead letter failed; the message is retried"
		if fault.IsPermanent(err) {
			// The failure topic refuses this very record (too large for
			// it, say). Committing without it would lose the message, so
			// it is retried until the topic takes it, and its partition
			// stalls meanwhile (stall detection reports it).
			msg = "writing the dead letter failed: the failure topic refuses the record; it is retried until the topic takes it, and its partition waits"
			err = fault.Transient(err)
		}
		d.log.LogAttrs(context.Background(), slog.LevelError, msg,
			append(attrs, slog.String("write_error", err.Error()))...)
		r.Resume(Result(fmt.Errorf("prosody: writing to the failure topic %q failed: %w", d.topic, err)))
		return
	}
	d.written.Add(1)
	d.log.LogAttrs(context.Background(), slog.LevelWarn, "message written to the failure topic", attrs...)
	r.Resume(Result(nil))
}

// source is where a dead letter's record came from.
type source struct {
	topic     string
	partition int32
	offset    int64
	timestamp time.Time
	headers   []event.Header
}

// deadLetterHeaders are the headers of a dead letter after the producer's
// own, in the order of spec §4.13.
func (s source) deadLetterHeaders(group string, cause error) []event.Header {
	return []event.Header{
		{Key: "source-kind", Value: []byte("message")},
		{Key: "source-topic", Value: []byte(s.topic)},
		{Key: "source-partition", Value: strconv.AppendInt(nil, int64(s.partition), 10)},
		{Key: "source-offset", Value: strconv.AppendInt(nil, s.offset, 10)},
		{Key: "source-timestamp", Value: s.timestamp.UTC().AppendFormat(nil, "2006-01-02T15:04:05.000Z")},
		{Key: "source-group-id", Value: []byte(group)},
		{Key: "source-error", Value: []byte(cause.Error())},
	}
}
