package emitter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/tracing"
)

var testID = identity{group: "orders-svc", sourceSystem: "orders-src", hostname: "vm"}

const (
	parent = "00-21d475b64b233d218497e5c109cb94e0-99df2babca6cb2b5-01"
)

func TestRecords(t *testing.T) {
	at := telemetry.At(time.Date(2026, 12, 3, 12, 44, 49, 211_400_000, time.UTC))
	traced := []event.Header{{Key: tracing.TraceParent, Value: []byte(parent)}, {Key: tracing.TraceState, Value: []byte("")}}
	msg := &event.Message{Topic: "orders", Partition: 3, Offset: 41, Key: "k\"1", Headers: traced}
	plain := &event.Message{Topic: "orders", Partition: 3, Offset: 42, Key: "k2"}
	timer := &event.Timer{Topic: "orders", Partition: 3, Key: "k1", Time: time.Date(2026, 12, 3, 12, 44, 51, 0, time.UTC),
		TraceContext: map[string]string{tracing.TraceParent: parent, tracing.TraceState: "a=b"}}
	boom := fault.Permanent(errors.New("bad\nline"))
	cases := []struct {
		name string
		ev   telemetry.Event
		want string
	}{
		{"dispatched", telemetry.Event{Kind: telemetry.HandlerInvoked, At: at, Subject: msg},
			`{"type":"prosody.message.dispatched","eventTime":"2026-12-03T12:44:49.211Z","offset":41,"topic":"orders","partition":3,"key":"k\"1","source":"orders-svc","hostname":"vm","demandType":"normal","traceParent":"` + parent + `","traceState":""}`},
		{"succeeded without trace", telemetry.Event{Kind: telemetry.HandlerSucceeded, At: at, Subject: plain},
			`{"type":"prosody.message.succeeded","eventTime":"2026-12-03T12:44:49.211Z","offset":42,"topic":"orders","partition":3,"key":"k2","source":"orders-svc","hostname":"vm","demandType":"normal"}`},
		{"failed retry", telemetry.Event{Kind: telemetry.HandlerFailed, At: at, Subject: plain, Failure: true, Err: boom},
			`{"type":"prosody.message.failed","eventTime":"2026-12-03T12:44:49.211Z","offset":42,"topic":"orders","partition":3,"key":"k2","source":"orders-svc","hostname":"vm","demandType":"failure","errorCategory":"permanent","exception":"bad\nline"}`},
		{"timer scheduled", telemetry.Event{Kind: telemetry.TimerScheduled, At: at, Subject: timer, TimerType: telemetry.TimerApplication},
			`{"type":"prosody.timer.scheduled","eventTime":"2026-12-03T12:44:49.211Z","scheduledTime":"2026-12-03T12:44:51Z","timerType":"application","topic":"orders","partition":3,"key":"k1","source":"orders-svc","hostname":"vm","traceParent":"` + parent + `","traceState":"a=b"}`},
		{"timer cancelled", telemetry.Event{Kind: telemetry.TimerCancelled, At: at, Subject: &event.Timer{Topic: "orders", Partition: 3, Key: "k1", Time: timer.Time}, TimerType: telemetry.TimerDeferredMessage},
			`{"type":"prosody.timer.cancelled","eventTime":"2026-12-03T12:44:49.211Z","scheduledTime":"2026-12-03T12:44:51Z","timerType":"deferredMessage","topic":"orders","partition":3,"key":"k1","source":"orders-svc","hostname":"vm"}`},
		{"timer dispatched", telemetry.Event{Kind: telemetry.HandlerInvoked, At: at, Subject: timer},
			`{"type":"prosody.timer.dispatched","eventTime":"2026-12-03T12:44:49.211Z","scheduledTime":"2026-12-03T12:44:51Z","timerType":"application","topic":"orders","partition":3,"key":"k1","source":"orders-svc","hostname":"vm","demandType":"normal","traceParent":"` + parent + `","traceState":"a=b"}`},
		{"timer failed", telemetry.Event{Kind: telemetry.HandlerFailed, At: at, Subject: timer, Err: errors.New("x")},
			`{"type":"prosody.timer.failed","eventTime":"2026-12-03T12:44:49.211Z","scheduledTime":"2026-12-03T12:44:51Z","timerType":"application","topic":"orders","partition":3,"key":"k1","source":"orders-svc","hostname":"vm","demandType":"normal","errorCategory":"transient","exception":"x","traceParent":"` + parent + `","traceState":"a=b"}`},
		{"sent", telemetry.Event{Kind: telemetry.MessageSent, At: at, Subject: msg},
			`{"type":"prosody.message.sent","eventTime":"2026-12-03T12:44:49.211Z","topic":"orders","partition":3,"offset":41,"key":"k\"1","source":"orders-src","hostname":"vm","traceParent":"` + parent + `","traceState":""}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := recordOf(tc.ev)
			if !ok {
				t.Fatal("not serialised")
			}
			got := testID.appendRecord(nil, r)
			if string(got) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			if _, err := Check(got); err != nil {
				t.Fatalf("the record fails its schema: %v", err)
			}
		})
	}
}

// Records prosody-events 0.4.0 wrote to its telemetry topic (the
// exception text shortened), which the schema must accept as they are.
var originalRecords = []string{
	`{"type":"prosody.message.sent","eventTime":"2026-12-03T12:44:49.205Z","topic":"oracle-tel-6bca8c80","partition":0,"offset":0,"key":"k1","source":"oracle-src","hostname":"vm","traceParent":"00-21d475b64b233d218497e5c109cb94e0-584e1dcc5aeec41d-01","traceState":""}`,
	`{"type":"prosody.message.dispatched","eventTime":"2026-12-03T12:44:49.211Z","offset":0,"topic":"oracle-tel-6bca8c80","partition":0,"key":"k1","source":"oracle-tel","hostname":"vm","demandType":"normal","traceParent":"00-21d475b64b233d218497e5c109cb94e0-99df2babca6cb2b5-01","traceState":""}`,
	`{"type":"prosody.message.failed","eventTime":"2026-12-03T12:44:49.238Z","offset":1,"topic":"oracle-tel-6bca8c80","partition":0,"key":"k2","source":"oracle-tel","hostname":"vm","demandType":"normal","errorCategory":"transient","exception":"Python(PyErr { type: <class 'ValueError'>, value: ValueError('boom here') })","traceParent":"00-252e43ddc6c886e7f4bf6a969c70b009-d5e25e707a55ca88-01","traceState":""}`,
	`{"type":"prosody.timer.scheduled","eventTime":"2026-12-03T12:44:49.272Z","scheduledTime":"2026-12-03T12:44:51Z","timerType":"application","topic":"oracle-tel-6bca8c80","partition":0,"key":"k1","source":"oracle-tel","hostname":"vm","traceParent":"00-21d475b64b233d218497e5c109cb94e0-4dc1f1036a4d32b0-01","traceState":""}`,
	`{"type":"prosody.timer.succeeded","eventTime":"2026-12-03T12:44:51.274Z","scheduledTime":"2026-12-03T12:44:51Z","timerType":"application","topic":"oracle-tel-6bca8c80","partition":0,"key":"k1","source":"oracle-tel","hostname":"vm","demandType":"normal","traceParent":"00-ec51c20d300d2ee9a1d408568ee9af28-65b3dabcff291251-01","traceState":""}`,
}

func TestCheckAcceptsTheOriginalsRecords(t *testing.T) {
	for _, r := range originalRecords {
		if _, err := Check([]byte(r)); err != nil {
			t.Errorf("%v\n%s", err, r)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	good := `{"type":"prosody.message.succeeded","eventTime":"2026-12-03T12:44:49.211Z","offset":42,"topic":"orders","partition":3,"key":"k2","source":"g","hostname":"vm","demandType":"normal"}`
	if _, err := Check([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"out of order", `"offset":42,"topic":"orders"`, `"topic":"orders","offset":42`, "out of order"},
		{"seconds only", `49.211Z`, `49Z`, "not of the form"},
		{"string offset", `"offset":42`, `"offset":"42"`, "not a number"},
		{"unknown demand", `"normal"`, `"urgent"`, "not one of"},
		{"error on success", `"demandType":"normal"`, `"demandType":"normal","errorCategory":"transient","exception":"x"`, "failed events only"},
		{"extra field", `"demandType":"normal"`, `"demandType":"normal","extra":1`, "unexpected field"},
		{"unknown type", `prosody.message.succeeded`, `prosody.message.lost`, "unknown type"},
		{"half a trace", `"demandType":"normal"`, `"demandType":"normal","traceParent":"x"`, "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(good, tc.from, tc.to, 1)
			if _, err := Check([]byte(doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check(%s) = %v, want an error saying %q", doc, err, tc.want)
			}
		})
	}
}

func TestQuoting(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          `"plain"`,
		"a\"b\\c":        `"a\"b\\c"`,
		"\x01\t\r\n":     `"\u0001\t\r\n"`,
		"é\xffz":         `"é\ufffdz"`,
		"\u2028 emoji 😀": "\"\u2028 emoji 😀\"",
	} {
		if got := string(appendQuoted(nil, in)); got != want {
			t.Errorf("appendQuoted(%q) = %s, want %s", in, got, want)
		}
	}
}
