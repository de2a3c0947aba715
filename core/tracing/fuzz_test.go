package tracing

import (
	"context"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/prosody-events/prosody-go/core/event"
)

// splitHeaders turns fuzz input into a record's headers: NUL separates
// headers, the first '=' of each separates its key from its value, so any
// bytes (invalid UTF-8 too) reach the values.
func splitHeaders(data []byte) []event.Header {
	var hs []event.Header
	start := 0
	for i := 0; i <= len(data); i++ {
		if i < len(data) && data[i] != 0 {
			continue
		}
		part := data[start:i]
		start = i + 1
		key, value := part, []byte(nil)
		for j, b := range part {
			if b == '=' {
				key, value = part[:j], part[j+1:]
				break
			}
		}
		hs = append(hs, event.Header{Key: string(key), Value: value})
	}
	return hs
}

// FuzzHeaders checks the decoding of a record's trace headers against its
// contract (the first header of each name, only when UTF-8), and that what
// it decodes can be turned into a context and back into headers without a
// panic, keeping a valid trace parent.
func FuzzHeaders(f *testing.F) {
	for _, seed := range []string{
		"traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\x00tracestate=vendor=x\x00baggage=user=alice",
		"traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\x00traceparent=00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-00",
		"baggage=\xff\xfe\x00baggage=ok=1",
		"traceparent=garbage\x00tracestate=a=b,c=d",
		"source-system=x\x00=\x00==",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hs := splitHeaders(data)
		got := FromHeaders(hs)
		var want Fields
		seen := map[string]bool{}
		for _, h := range hs {
			var dst *string
			switch h.Key {
			case TraceParent:
				dst = &want.TraceParent
			case TraceState:
				dst = &want.TraceState
			case Baggage:
				dst = &want.Baggage
			default:
				continue
			}
			if seen[h.Key] {
				continue
			}
			seen[h.Key] = true
			if utf8.Valid(h.Value) {
				*dst = string(h.Value)
			}
		}
		if got != want {
			t.Fatalf("FromHeaders(%q) = %+v, want %+v", hs, got, want)
		}
		ctx := got.Context(context.Background())
		sc := trace.SpanContextFromContext(ctx)
		out := Inject(ctx)
		again := FromHeaders(out)
		if sc.IsValid() {
			if back := trace.SpanContextFromContext(again.Context(context.Background())); back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() {
				t.Fatalf("trace parent %q did not survive a round trip: %+v", got.TraceParent, again)
			}
		} else if again.TraceParent != "" {
			t.Fatalf("an invalid trace parent %q was written as %q", got.TraceParent, again.TraceParent)
		}
	})
}
