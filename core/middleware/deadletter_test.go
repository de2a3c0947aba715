package middleware

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// sentLetter is one write to a capturingSink.
type sentLetter struct {
	raw        bool
	topic      string
	key, value []byte
	headers    []event.Header
	trace      []event.Header // what the producer would inject from ctx
}

// capturingSink records writes; err fails them.
type capturingSink struct {
	err  error
	sent []sentLetter
}

func (s *capturingSink) SendJSON(ctx context.Context, topic, key string, value []byte, headers []event.Header) error {
	s.sent = append(s.sent, sentLetter{topic: topic, key: []byte(key), value: value, headers: headers, trace: tracing.Inject(ctx)})
	return s.err
}

func (s *capturingSink) SendRaw(ctx context.Context, topic string, key, value []byte, headers []event.Header) error {
	s.sent = append(s.sent, sentLetter{raw: true, topic: topic, key: key, value: value, headers: headers, trace: tracing.Inject(ctx)})
	return s.err
}

const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestDeadLetter(t *testing.T) {
	ts := time.Date(2026, 12, 1, 9, 30, 15, 123_456_789, time.FixedZone("x", 3600))
	msg := &event.Message{Topic: "orders", Partition: 7, Offset: 1234, Key: "user-1", Timestamp: ts,
		Payload: []byte(`{"id":"e-1","n":1}`), Headers: []event.Header{{Key: "traceparent", Value: []byte(traceParent)}}}
	undecodable := &Undecodable{Topic: "orders", Partition: 7, Offset: 1235, Timestamp: ts,
		Key: []byte{0xff, 0x00, 'k'}, Value: []byte("not json"), Reason: errors.New("record value is not JSON")}
	tombstone := &Undecodable{Topic: "orders", Partition: 7, Offset: 1236, Timestamp: ts, Reason: errors.New("no key")}
	wantHeaders := func(offset, why string) []string {
		return []string{"source-kind=message", "source-topic=orders", "source-partition=7", "source-offset=" + offset,
			"source-timestamp=2026-12-01T08:30:15.123Z", "source-group-id=group", "source-error=" + why}
	}
	tests := []struct {
		name       string
		ev         event.Event
		handler    error
		sinkErr    error
		stack      func(d *DeadLetter) *Stack
		wantSent   int
		wantErr    bool
		wantClass  fault.Class
		wantRaw    bool
		wantKey    []byte
		wantValue  []byte
		wantHeader []string
	}{
		{name: "success is not written", ev: msg},
		{name: "a failure is written and the outcome is a success", ev: msg, handler: errors.New("boom"), wantSent: 1,
			wantKey: []byte("user-1"), wantValue: msg.Payload, wantHeader: wantHeaders("1234", "boom")},
		{name: "a permanent failure is written", ev: msg, handler: fault.Permanent(errors.New("bad")), wantSent: 1,
			wantKey: []byte("user-1"), wantValue: msg.Payload, wantHeader: wantHeaders("1234", "bad")},
		{name: "a terminal failure passes through", ev: msg, handler: fault.Terminal(errors.New("gone")), wantErr: true, wantClass: fault.ClassTerminal},
		{name: "timers are never dead-lettered", ev: &event.Timer{Key: "k"}, handler: errors.New("boom"), wantErr: true, wantClass: fault.ClassTransient},
		{name: "a failed write is transient, whatever the producer says", ev: msg, handler: errors.New("boom"),
			sinkErr: fault.Permanent(errors.New("record too large")), wantSent: 1, wantErr: true, wantClass: fault.ClassTransient,
			wantKey: []byte("user-1"), wantValue: msg.Payload, wantHeader: wantHeaders("1234", "boom")},
		{name: "a terminal write failure stays terminal", ev: msg, handler: errors.New("boom"),
			sinkErr: fault.Terminal(errors.New("producer closed")), wantSent: 1, wantErr: true, wantClass: fault.ClassTerminal,
			wantKey: []byte("user-1"), wantValue: msg.Payload, wantHeader: wantHeaders("1234", "boom")},
		{name: "an undecodable record is written raw", ev: undecodable, wantSent: 1, wantRaw: true,
			stack:   func(d *DeadLetter) *Stack { return NewStack(RejectUndecodable{}, d) },
			wantKey: undecodable.Key, wantValue: undecodable.Value, wantHeader: wantHeaders("1235", "record value is not JSON")},
		{name: "a tombstone without a key is written with neither", ev: tombstone, wantSent: 1, wantRaw: true,
			stack:      func(d *DeadLetter) *Stack { return NewStack(RejectUndecodable{}, d) },
			wantHeader: wantHeaders("1236", "no key")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &capturingSink{err: tt.sinkErr}
			d := NewDeadLetter("failures", "group", sink, discardLogger())
			s := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { return tt.handler }), nil), d)
			if tt.stack != nil {
				s = tt.stack(d)
			}
			ctx, cancel := newInv()
			defer cancel(nil)
			err := invoke(s, ctx, tt.ev)
			if (err != nil) != tt.wantErr || (err != nil && fault.ClassOf(err) != tt.wantClass) {
				t.Fatalf("err = %v (%v), want error %v of class %v", err, fault.ClassOf(err), tt.wantErr, tt.wantClass)
			}
			if len(sink.sent) != tt.wantSent {
				t.Fatalf("%d dead letters written, want %d", len(sink.sent), tt.wantSent)
			}
			if tt.wantSent == 0 {
				return
			}
			got := sink.sent[0]
			if got.raw != tt.wantRaw || got.topic != "failures" || string(got.key) != string(tt.wantKey) ||
				(got.key == nil) != (tt.wantKey == nil) || string(got.value) != string(tt.wantValue) || (got.value == nil) != (tt.wantValue == nil) {
				t.Fatalf("wrote %+v", got)
			}
			var hs []string
			for _, h := range got.headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			if strings.Join(hs, "\n") != strings.Join(tt.wantHeader, "\n") {
				t.Fatalf("headers\n%s\nwant\n%s", strings.Join(hs, "\n"), strings.Join(tt.wantHeader, "\n"))
			}
			if m, ok := tt.ev.(*event.Message); ok && (len(got.trace) == 0 || tracing.FromHeaders(got.trace).TraceParent != tracing.FromHeaders(m.Headers).TraceParent) {
				t.Fatalf("the dead letter carries trace %v, want the message's", got.trace)
			}
			if err == nil && d.Written() != 1 {
				t.Fatalf("Written = %d", d.Written())
			}
		})
	}
}
