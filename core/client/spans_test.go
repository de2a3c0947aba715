package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
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
//
// With extras, it also sends a message of the receiver's own source
// system (filtered: a message.filtered span) and one whose first attempt
// fails (deferred, then read back: a load span), after the first.
func spanChain(t *testing.T, tg target, tp trace.TracerProvider, rel config.SpanLinking, extras bool) {
	t.Helper()
	topic := createTopic(t, tg, 1)
	app := tp.Tracer("app")
	group := testservices.UniqueName("spans")
	sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "spans-sender" }))
	receiver := newClient(t, newConfig(t, tg, func(c *config.Config) {
		c.GroupID = group
		c.SubscribedTopics = []string{topic}
		c.CassandraKeyspace = testservices.UniqueName("spans")
		c.MessageSpans, c.TimerSpans = rel, rel
	}))
	fired, retried := make(chan struct{}), make(chan struct{})
	var failedOnce atomic.Bool
	err := receiver.Subscribe(event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error {
			if m.Key == "fails-once" {
				if failedOnce.CompareAndSwap(false, true) {
					return errors.New("the first attempt fails")
				}
				close(retried)
				return nil
			}
			_, span := app.Start(ctx, "handle message")
			defer span.End()
			if got := baggage.FromContext(ctx).Member("tenant").Value(); got != "acme" {
				t.Errorf("the handler's context carries baggage tenant=%q, want acme", got)
			}
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
	tenant, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(tenant)
	ctx, request := app.Start(baggage.ContextWithBaggage(context.Background(), bag), "request")
	if err := sender.Send(ctx, topic, "k1", []byte(`{"id":"e1"}`)); err != nil {
		t.Fatal(err)
	}
	request.End()
	select {
	case <-fired:
	case <-time.After(60 * time.Second):
		t.Fatal("the timer did not fire")
	}
	if extras {
		loop := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = group }))
		if err := loop.Send(ctx, topic, "looped", []byte(`{"id":"e2"}`)); err != nil {
			t.Fatal(err)
		}
		if err := sender.Send(ctx, topic, "fails-once", []byte(`{"id":"e3"}`)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-retried:
		case <-time.After(60 * time.Second):
			t.Fatal("the deferred message was not retried")
		}
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
			spanChain(t, target{name: "mock", mock: true}, tp, rel, true)
			spans := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range rec.Ended() {
				// The chain's spans by name; the extras' by name and key.
				switch key := attrs(s)["key"].AsString(); {
				case key == "looped" || key == "fails-once":
					spans[s.Name()+" "+key] = s
				case spans[s.Name()] == nil:
					spans[s.Name()] = s
				}
			}
			for _, name := range []string{"request", "send", "receive", "handle message", "trigger", "handle timer"} {
				if spans[name] == nil {
					t.Fatalf("no %q span among %v", name, names(rec.Ended()))
				}
			}
			checkSpanTree(t, rel, spans)
			filtered := spans["message.filtered looped"]
			if filtered == nil || attrs(filtered)["reason"].AsString() != "source-system-loop" {
				t.Fatalf("no message.filtered span of reason source-system-loop among %v", names(rec.Ended()))
			}
			load := spans["load fails-once"]
			if load == nil {
				t.Fatalf("no load span of the deferred message among %v", names(rec.Ended()))
			}
			if a := attrs(load); a["topic"].AsString() == "" || a["offset"].AsInt64() != 2 || a["cached"].Type() != attribute.BOOL {
				t.Errorf("load attributes %v", a)
			}
			// The load span comes from the record's context (its send
			// span), as the message's receive span does.
			receive := spans["receive fails-once"]
			if receive == nil || origin(load) != origin(receive) || !origin(load).IsValid() {
				t.Errorf("the load span does not come from the record's context as its receive span does")
			}
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

// origin is the span s comes from: its parent, or the span it links to.
func origin(s sdktrace.ReadOnlySpan) trace.SpanID {
	if s.Parent().IsValid() {
		return s.Parent().SpanID()
	}
	if links := s.Links(); len(links) > 0 {
		return links[0].SpanContext.SpanID()
	}
	return trace.SpanID{}
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
