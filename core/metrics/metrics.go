// Package metrics exposes a consumer's metrics in the Prometheus text
// format, for the probe server's /metrics route.
//
// Two kinds of source feed it. What the consumer already counts or can
// say when asked (partition lag, unfinished offsets, paused partitions,
// filtered records, dedup hits, dead letters, telemetry drops) is read at
// scrape time, so it costs nothing between scrapes. What happens per
// handler call (its duration and outcome, calls in flight, retries, timers
// scheduled and fired) comes from the consumer's telemetry broadcast, to
// which Observer subscribes: a few atomic operations per event.
//
// Labels are bounded: topic, partition, kind, outcome, reason, type —
// never a key.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/prosody-events/prosody-go/core/consumer"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/filter"
	"github.com/prosody-events/prosody-go/core/telemetry"
)

// Sources are what the scrape-time metrics read. Any may be nil.
type Sources struct {
	// Deduplicated is the number of messages skipped as handled before.
	Deduplicated func() int64
	// DeadLetters is the number of records written to the failure topic.
	DeadLetters func() int64
	// TelemetryDropped is the number of telemetry events the emitter
	// dropped.
	TelemetryDropped func() uint64
}

// Metrics is one consumer's metrics: a registry, its HTTP handler and the
// observer of its broadcast.
type Metrics struct {
	reg      *prometheus.Registry
	observer *Observer
	scraped  *scraped
}

// New builds the metrics of a consumer. Subscribe m.Observer() to the
// consumer's broadcast before it starts, and Attach the consumer once it
// has.
func New(src Sources) *Metrics {
	reg := prometheus.NewRegistry()
	obs := newObserver()
	sc := &scraped{src: src}
	reg.MustRegister(obs.duration, obs.retries, obs.timersScheduled, obs.timersFired, obs.deferrals, obs, sc)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Metrics{reg: reg, observer: obs, scraped: sc}
}

// Attach makes c the consumer whose partitions and counts are reported.
func (m *Metrics) Attach(c *consumer.Consumer) { m.scraped.consumer.Store(c) }

// Observer is the observer to subscribe to the consumer's broadcast.
func (m *Metrics) Observer() *Observer { return m.observer }

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry, for a program that serves it elsewhere.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// durationBuckets span a quick in-memory handler (a millisecond, which is
// also the resolution of the broadcast's clock) to one that waits on
// remote services for a minute.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Observer turns broadcast events into metrics.
type Observer struct {
	duration        *prometheus.HistogramVec
	retries         *prometheus.CounterVec
	timersScheduled *prometheus.CounterVec
	timersFired     *prometheus.CounterVec
	deferrals       *prometheus.CounterVec

	inFlightDesc *prometheus.Desc
	// topics holds each topic's pre-resolved series, so that an event
	// costs a map read, not a label lookup.
	topics sync.Map // string -> *topicSeries
}

type topicSeries struct {
	inFlight atomic.Int64
	// duration[kind][outcome]; kind 0 message, 1 timer.
	duration [2][4]prometheus.Observer
	retries  prometheus.Counter
	fired    prometheus.Counter
}

var outcomes = [4]string{"success", "transient", "permanent", "terminal"}

func newObserver() *Observer {
	return &Observer{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prosody_handler_duration_seconds",
			Help:    "Time handler calls took, by topic, event kind (message, timer) and outcome (success, or the failure's class).",
			Buckets: durationBuckets,
		}, []string{"topic", "kind", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prosody_handler_retries_total",
			Help: "Handler calls that were retries (failure demand: an in-place retry or a deferred retry), by topic.",
		}, []string{"topic"}),
		timersScheduled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prosody_timers_scheduled_total",
			Help: "Timers written to the store, by type (application, or the retry timers of deferral: deferredMessage, deferredTimer).",
		}, []string{"type"}),
		timersFired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prosody_timers_fired_total",
			Help: "Application timers whose handler was called, by topic.",
		}, []string{"topic"}),
		deferrals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prosody_deferrals_total",
			Help: "Retries scheduled for deferred keys (a key's first deferral and each later retry), by what was deferred (message, timer).",
		}, []string{"type"}),
		inFlightDesc: prometheus.NewDesc("prosody_handlers_in_flight", "Handler calls under way, by topic.", []string{"topic"}, nil),
	}
}

func (o *Observer) series(topic string) *topicSeries {
	if s, ok := o.topics.Load(topic); ok {
		return s.(*topicSeries)
	}
	s := &topicSeries{
		retries: o.retries.WithLabelValues(topic),
		fired:   o.timersFired.WithLabelValues(topic),
	}
	for k, kind := range [2]string{"message", "timer"} {
		for i, outcome := range outcomes {
			s.duration[k][i] = o.duration.WithLabelValues(topic, kind, outcome)
		}
	}
	actual, _ := o.topics.LoadOrStore(topic, s)
	return actual.(*topicSeries)
}

// Observe implements telemetry.Observer.
func (o *Observer) Observe(e telemetry.Event) {
	switch e.Kind {
	case telemetry.HandlerInvoked:
		s := o.series(e.Topic)
		s.inFlight.Add(1)
		if e.Failure {
			s.retries.Inc()
		}
		if _, ok := e.Subject.(*event.Timer); ok {
			s.fired.Inc()
		}
	case telemetry.HandlerSucceeded, telemetry.HandlerFailed:
		s := o.series(e.Topic)
		s.inFlight.Add(-1)
		kind := 0
		if _, ok := e.Subject.(*event.Timer); ok {
			kind = 1
		}
		outcome := 0
		if e.Kind == telemetry.HandlerFailed {
			outcome = 1 + min(int(fault.ClassOf(e.Err)), len(outcomes)-2)
		}
		if e.Start != 0 && e.At >= e.Start {
			s.duration[kind][outcome].Observe(float64(e.At-e.Start) / 1e9)
		}
	case telemetry.TimerScheduled:
		o.timersScheduled.WithLabelValues(e.TimerType).Inc()
		switch e.TimerType {
		case telemetry.TimerDeferredMessage:
			o.deferrals.WithLabelValues("message").Inc()
		case telemetry.TimerDeferredTimer:
			o.deferrals.WithLabelValues("timer").Inc()
		}
	}
}

// Describe implements prometheus.Collector for the in-flight gauge.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) { ch <- o.inFlightDesc }

// Collect implements prometheus.Collector for the in-flight gauge.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.topics.Range(func(k, v any) bool {
		ch <- prometheus.MustNewConstMetric(o.inFlightDesc, prometheus.GaugeValue, float64(v.(*topicSeries).inFlight.Load()), k.(string))
		return true
	})
}

// scraped collects what is read at scrape time.
type scraped struct {
	src      Sources
	consumer atomic.Pointer[consumer.Consumer]
}

var (
	lagDesc = prometheus.NewDesc("prosody_consumer_lag",
		"Records of the partition not yet handled: its high-water mark (as of its last fetch) less the offset it would be committed at.",
		[]string{"topic", "partition"}, nil)
	unfinishedDesc = prometheus.NewDesc("prosody_partition_unfinished_offsets",
		"Offsets of the partition taken and not yet finished (in flight or queued behind their key).",
		[]string{"topic", "partition"}, nil)
	pausedDesc = prometheus.NewDesc("prosody_partitions_paused",
		"Assigned partitions left out of fetches because they hold as many fetched records as they may.", nil, nil)
	assignedDesc = prometheus.NewDesc("prosody_partitions_assigned", "Partitions assigned to this consumer.", nil, nil)
	filteredDesc = prometheus.NewDesc("prosody_records_filtered_total",
		"Records not handed to a handler, by reason (a filter's, or a decoding failure's).", []string{"reason"}, nil)
	deadLetterDesc = prometheus.NewDesc("prosody_dead_letters_total",
		"Records written to the failure topic.", nil, nil)
	handledDesc = prometheus.NewDesc("prosody_events_handled_total",
		"Events (messages and timers) whose handling finished with success.", nil, nil)
	telemetryDroppedDesc = prometheus.NewDesc("prosody_telemetry_events_dropped_total",
		"Telemetry events the emitter dropped (it could not keep up or reach Kafka).", nil, nil)
)

func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagDesc, unfinishedDesc, pausedDesc, assignedDesc, filteredDesc, deadLetterDesc, handledDesc, telemetryDroppedDesc} {
		ch <- d
	}
}

func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	if c := s.consumer.Load(); c != nil {
		parts := c.Partitions()
		paused := 0
		for _, p := range parts {
			part := strconv.Itoa(int(p.Partition))
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(p.Lag()), p.Topic, part)
			ch <- prometheus.MustNewConstMetric(unfinishedDesc, prometheus.GaugeValue, float64(p.Unfinished), p.Topic, part)
			if p.Paused {
				paused++
			}
		}
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, float64(paused))
		ch <- prometheus.MustNewConstMetric(assignedDesc, prometheus.GaugeValue, float64(len(parts)))
		st := c.Stats()
		ch <- prometheus.MustNewConstMetric(handledDesc, prometheus.CounterValue, float64(st.Handled()))
		for r := filter.Reason(1); int(r) < filter.NumReasons; r++ {
			n := st.Skipped(r)
			if r == filter.ReasonDeduplicated && s.src.Deduplicated != nil {
				n += s.src.Deduplicated()
			}
			if r == filter.ReasonDuplicateEventID {
				continue // the producer's, not the consumer's
			}
			ch <- prometheus.MustNewConstMetric(filteredDesc, prometheus.CounterValue, float64(n), r.String())
		}
	}
	if s.src.DeadLetters != nil {
		ch <- prometheus.MustNewConstMetric(deadLetterDesc, prometheus.CounterValue, float64(s.src.DeadLetters()))
	}
	if s.src.TelemetryDropped != nil {
		ch <- prometheus.MustNewConstMetric(telemetryDroppedDesc, prometheus.CounterValue, float64(s.src.TelemetryDropped()))
	}
}
