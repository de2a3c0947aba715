package tracing

import (
	"context"
	"testing"

	"github.com/prosody-events/prosody-go/core/event"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestInjectRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		fields Fields
		want   []event.Header
	}{
		{"none", Fields{}, nil},
		{"invalid traceparent is dropped", Fields{TraceParent: "garbage", TraceState: "a=b"}, nil},
		{"traceparent writes an empty tracestate", Fields{TraceParent: parent},
			[]event.Header{{Key: TraceParent, Value: []byte(parent)}, {Key: TraceState, Value: []byte("")}}},
		{"baggage first, then trace context", Fields{TraceParent: parent, TraceState: "v=1", Baggage: "user=alice"},
			[]event.Header{
				{Key: Baggage, Value: []byte("user=alice")},
				{Key: TraceParent, Value: []byte(parent)},
				{Key: TraceState, Value: []byte("v=1")},
			}},
		{"baggage alone", Fields{Baggage: "k=v"}, []event.Header{{Key: Baggage, Value: []byte("k=v")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Inject(tt.fields.Context(context.Background()))
			if len(got) != len(tt.want) {
				t.Fatalf("Inject = %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i].Key != tt.want[i].Key || string(got[i].Value) != string(tt.want[i].Value) {
					t.Errorf("header %d = %s=%q, want %s=%q", i, got[i].Key, got[i].Value, tt.want[i].Key, tt.want[i].Value)
				}
			}
			if len(got) > 0 && FromHeaders(got) != tt.fields {
				t.Errorf("FromHeaders(Inject(%+v)) = %+v", tt.fields, FromHeaders(got))
			}
		})
	}
}

func TestFromHeaders(t *testing.T) {
	tests := []struct {
		name    string
		headers []event.Header
		want    Fields
	}{
		{"absent", []event.Header{{Key: "source-system", Value: []byte("x")}}, Fields{}},
		{"first of each name wins", []event.Header{
			{Key: TraceParent, Value: []byte("first")},
			{Key: TraceParent, Value: []byte("second")},
			{Key: TraceState, Value: []byte("s")},
			{Key: Baggage, Value: []byte("b")},
		}, Fields{TraceParent: "first", TraceState: "s", Baggage: "b"}},
		{"non-UTF-8 value is ignored", []event.Header{
			{Key: TraceParent, Value: []byte{0xff, 0xfe}},
			{Key: TraceParent, Value: []byte("later")},
		}, Fields{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FromHeaders(tt.headers); got != tt.want {
				t.Errorf("FromHeaders = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A stored timer's map gives back the fields it was made from.
func TestFieldsMapRoundTrip(t *testing.T) {
	for _, f := range []Fields{{}, {TraceParent: parent}, {TraceParent: parent, TraceState: "v=1", Baggage: "k=v"}, {Baggage: "k=v"}} {
		m := f.Map()
		if (f == Fields{}) != (m == nil) || FieldsOf(m) != f {
			t.Errorf("Fields %+v → map %v → %+v", f, m, FieldsOf(m))
		}
	}
}
