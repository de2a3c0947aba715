package metrics

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/telemetry"
)

// TestObserver publishes handler and timer events through a broadcast and
// reads the metrics back through the handler and the text parser.
func TestObserver(t *testing.T) {
	m := New(Sources{DeadLetters: func() int64 { return 3 }})
	var b telemetry.Broadcast
	defer b.Subscribe(m.Observer())()
	msg := &event.Message{Topic: "orders", Key: "k"}
	timer := &event.Timer{Topic: "orders", Key: "k"}
	const ms = int64(1e6)
	publish := func(kind telemetry.Kind, subject event.Event, failure bool, start, at int64, err error) {
		b.Publish(telemetry.Event{Kind: kind, Topic: "orders", Key: "k", Subject: subject, Failure: failure, Start: start, At: at, Err: err})
	}
	publish(telemetry.HandlerInvoked, msg, false, 0, 10*ms, nil)
	publish(telemetry.HandlerInvoked, msg, false, 0, 10*ms, nil)
	publish(telemetry.HandlerSucceeded, msg, false, 10*ms, 13*ms, nil)
	publish(telemetry.HandlerInvoked, msg, true, 0, 20*ms, nil)
	publish(telemetry.HandlerFailed, msg, true, 20*ms, 220*ms, fault.Permanent(errors.New("no")))
	publish(telemetry.HandlerInvoked, timer, false, 0, 30*ms, nil)
	publish(telemetry.HandlerSucceeded, timer, false, 30*ms, 30*ms, nil)
	b.Publish(telemetry.Event{Kind: telemetry.TimerScheduled, Subject: timer, TimerType: telemetry.TimerDeferredMessage})
	b.Publish(telemetry.Event{Kind: telemetry.TimerScheduled, Subject: timer, TimerType: telemetry.TimerApplication})

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s in\n%s", name, rec.Body.String())
		}
	next:
		for _, s := range f.Metric {
			got := map[string]string{}
			for _, l := range s.Label {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch {
			case s.Histogram != nil:
				return float64(s.Histogram.GetSampleCount())
			case s.Counter != nil:
				return s.Counter.GetValue()
			default:
				return s.Gauge.GetValue()
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"prosody_handlers_in_flight", []string{"topic", "orders"}, 1},
		{"prosody_handler_duration_seconds", []string{"topic", "orders", "kind", "message", "outcome", "success"}, 1},
		{"prosody_handler_duration_seconds", []string{"kind", "message", "outcome", "permanent"}, 1},
		{"prosody_handler_duration_seconds", []string{"kind", "timer", "outcome", "success"}, 1},
		{"prosody_handler_retries_total", []string{"topic", "orders"}, 1},
		{"prosody_timers_fired_total", []string{"topic", "orders"}, 1},
		{"prosody_timers_scheduled_total", []string{"type", "application"}, 1},
		{"prosody_deferrals_total", []string{"type", "message"}, 1},
		{"prosody_dead_letters_total", nil, 3},
	} {
		if got := value(tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// The 200 ms failure lands in the 0.25 s bucket, not the 0.1 s one.
	for _, s := range fams["prosody_handler_duration_seconds"].Metric {
		labels := map[string]string{}
		for _, l := range s.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["kind"] == "message" && labels["outcome"] == "permanent" {
			for _, bk := range s.Histogram.Bucket {
				want := uint64(0)
				if bk.GetUpperBound() >= 0.25 {
					want = 1
				}
				if bk.GetCumulativeCount() != want {
					t.Errorf("bucket le=%v holds %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), want)
				}
			}
		}
	}
}
