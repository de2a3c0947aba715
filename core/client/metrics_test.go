package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// scrape reads /metrics from the probe server at addr and parses it with
// the Prometheus text parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + strings.Replace(addr, "0.0.0.0", "127.0.0.1", 1) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// sum adds the values of a family's series whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	total := 0.0
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

// TestMetricsLagGoesToZero: a backlog waits in the topic while the handler
// is held; /metrics shows it as lag, then, once the handler runs, lag goes
// to 0 and the handler histogram, retries and deferrals count what
// happened.
func TestMetricsLagGoesToZero(t *testing.T) {
	tg := target{name: "kafka"}
	testservices.RequireKafka(t)
	testservices.RequireCassandra(t)
	topic := createTopic(t, tg, 2)
	const n = 400
	sender := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "metrics-sender" }))
	for i := 0; i < n; i++ {
		if err := sender.Send(t.Context(), topic, fmt.Sprintf("k%d", i%40), []byte(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	receiver := newClient(t, newConfig(t, tg, func(c *config.Config) {
		c.GroupID = testservices.UniqueName("metrics")
		c.SubscribedTopics = []string{topic}
		c.CassandraKeyspace = testservices.UniqueName("metrics")
		c.ProbePort = config.Some(0)
	}))
	release := make(chan struct{})
	var failedOnce atomic.Bool
	err := receiver.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
		<-release
		if m.Key == "k7" && failedOnce.CompareAndSwap(false, true) {
			return errors.New("fails once")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	addr := receiver.ProbeAddr()
	var fams map[string]*dto.MetricFamily
	waitFor(t, 60*time.Second, "the backlog shown as lag, with handlers held in flight", func() bool {
		fams = scrape(t, addr)
		return sum(fams, "prosody_consumer_lag") == n && sum(fams, "prosody_handlers_in_flight") >= 1
	})
	if got := sum(fams, "prosody_partitions_assigned"); got != 2 {
		t.Fatalf("partitions assigned %v", got)
	}
	close(release)
	// The failed message's key is deferred: its messages are committed
	// (stored for their retry), so lag reaches 0 while they wait, and they
	// all succeed once retried.
	waitFor(t, 60*time.Second, "lag at 0 and every message handled", func() bool {
		fams = scrape(t, addr)
		return sum(fams, "prosody_consumer_lag") == 0 && sum(fams, "prosody_handlers_in_flight") == 0 &&
			sum(fams, "prosody_handler_duration_seconds", "topic", topic, "kind", "message", "outcome", "success") == n
	})
	if got := sum(fams, "prosody_handler_duration_seconds", "outcome", "transient"); got != 1 {
		t.Errorf("%v transient failures in the histogram, want 1", got)
	}
	if got := sum(fams, "prosody_handler_retries_total", "topic", topic); got < 1 {
		t.Errorf("retries %v", got)
	}
	if got := sum(fams, "prosody_deferrals_total", "type", "message"); got < 1 {
		t.Errorf("deferrals %v: the failure is deferred in pipeline mode", got)
	}
	if got := sum(fams, "prosody_records_filtered_total", "reason", "source-system-loop"); got != 0 {
		t.Errorf("filtered %v", got)
	}
	if fams["go_goroutines"] == nil || fams["prosody_dead_letters_total"] == nil {
		t.Error("the Go runtime and dead-letter metrics are missing")
	}
}
