package client

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// spanChain runs produce → consume → schedule → timer fire with the
// core's spans recorded by tp, message_spans and timer_spans set to rel,
// and a Go handler that makes spans of its own; it returns once the
// timer's handler ran.
func spanChain(t *testing.T, tg target, tp trace.TracerProvider, rel config.SpanLinking) {
	t.Helper()
	topic := createTopic(t, tg, 1)
	app := tp.Tracer("app")
	sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "spans-sender" }))
	receiver := newClient(t, newConfig(t, tg, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("spans")
		c.SubscribedTopics = []string{topic}
		c.CassandraKeyspace = testservices.UniqueName("spans")
		c.MessageSpans, c.TimerSpans = rel, rel
	}))
	fired := make(chan struct{})
	err := receiver.Subscribe(event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error {
			_, span := app.Start(ctx, "handle message")
			defer span.End()
			return ctx.Schedule(time.Now().Add(time.Second))
		},
		Timer: func(ctx *event.Context, tm *event.Timer) error {
			_, span := app.Start(ctx, "handle timer")
			span.End()
			close(fired)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, request := app.Start(context.Background(), "request")
	if err := sender.Send(ctx, topic, "k1", []byte(`{"id":"e1"}`)); err != nil {
		t.Fatal(err)
	}
	request.End()
	select {
	case <-fired:
	case <-time.After(60 * time.Second):
		t.Fatal("the timer did not fire")
	}
	if err := receiver.Unsubscribe(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestSpansOfTheChain checks the span tree of produce → consume →
// schedule → timer fire, recorded in process, in both relations.
func TestSpansOfTheChain(t *testing.T) {
	for _, rel := range []config.SpanLinking{config.SpanChild, config.SpanFollowsFrom} {
		t.Run(string(rel), func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			tracing.SetProvider(tp)
			defer tracing.SetProvider(nil)
			spanChain(t, target{name: "mock", mock: true}, tp, rel)
			spans := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range rec.Ended() {
				spans[s.Name()] = s
			}
			for _, name := range []string{"request", "send", "receive", "handle message", "trigger", "handle timer"} {
				if spans[name] == nil {
					t.Fatalf("no %q span among %v", name, names(rec.Ended()))
				}
			}
			checkSpanTree(t, rel, spans)
		})
	}
}

func names(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name())
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// related checks that child comes from parent as rel says: its parent in
// the same trace, or a new root linked to it.
func related(t *testing.T, rel config.SpanLinking, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if rel == config.SpanChild {
		if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%s is not a child of %s", child.Name(), parent.Name())
		}
		return
	}
	if child.Parent().IsValid() || child.SpanContext().TraceID() == parent.SpanContext().TraceID() {
		t.Errorf("%s is not a new root (parent %v)", child.Name(), child.Parent())
	}
	links := child.Links()
	if len(links) != 1 || links[0].SpanContext.SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("%s does not link to %s: %v", child.Name(), parent.Name(), links)
	}
	if len(links[0].Attributes) != 1 || links[0].Attributes[0] != attribute.String("opentracing.ref_type", "follows_from") {
		t.Errorf("link attributes %v", links[0].Attributes)
	}
}

func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("%s is not a child of %s", child.Name(), parent.Name())
	}
}

func checkSpanTree(t *testing.T, rel config.SpanLinking, spans map[string]sdktrace.ReadOnlySpan) {
	t.Helper()
	send, receive, trigger := spans["send"], spans["receive"], spans["trigger"]
	childOf(t, send, spans["request"])
	if send.SpanKind() != trace.SpanKindProducer || receive.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kinds: send %v, receive %v", send.SpanKind(), receive.SpanKind())
	}
	a := attrs(send)
	if a["topic"].AsString() == "" || a["payload_size"].AsInt64() != int64(len(`{"id":"e1"}`)) || a["offset"].AsInt64() != 0 ||
		a["timestamp"].AsInt64() < time.Now().Add(-time.Hour).UnixMilli() {
		t.Errorf("send attributes %v", a)
	}
	related(t, rel, receive, send)
	a = attrs(receive)
	if a["key"].AsString() != "k1" || a["offset"].AsInt64() != 0 || a["partition"].AsInt64() != 0 || a["topic"].AsString() == "" {
		t.Errorf("receive attributes %v", a)
	}
	childOf(t, spans["handle message"], receive)
	// The timer stored the receive span's context when it was scheduled.
	related(t, rel, trigger, receive)
	a = attrs(trigger)
	if a["key"].AsString() != "k1" || a["timer_type"].AsString() != "application" || a["time"].AsString() == "" {
		t.Errorf("trigger attributes %v", a)
	}
	childOf(t, spans["handle timer"], trigger)
}
