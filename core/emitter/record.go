package emitter

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// Event names on the telemetry topic.
const (
	MessageDispatched = "prosody.message.dispatched"
	MessageSucceeded  = "prosody.message.succeeded"
	MessageFailed     = "prosody.message.failed"
	MessageSent       = "prosody.message.sent"
	TimerScheduled    = "prosody.timer.scheduled"
	TimerCancelled    = "prosody.timer.cancelled"
	TimerDispatched   = "prosody.timer.dispatched"
	TimerSucceeded    = "prosody.timer.succeeded"
	TimerFailed       = "prosody.timer.failed"
)

// identity is what every record says about who wrote it.
type identity struct {
	group, sourceSystem, hostname string
}

// record is an event as the emitter queues it: what its document says,
// copied out of the event, so that a queued record holds nothing of the
// message it is about (the fetched batch its key and payload live in).
type record struct {
	kind      recordKind
	name      string
	at        int64
	topic     string
	partition int32
	offset    int64
	key       string
	demand    string // "" when the event has none
	timerTime time.Time
	timerType string
	// category and exception are a failed call's.
	category, exception string
	failed              bool
	// span is the span of the call, when recorded; trace otherwise the
	// context the event carried.
	span  trace.SpanContext
	trace tracing.Fields
}

type recordKind uint8

const (
	messageRecord recordKind = iota
	timerRecord
	sentRecord
)

// recordOf copies what the document of e needs; ok is false for an event
// that has none (no message or timer).
func recordOf(e telemetry.Event) (r record, ok bool) {
	r = record{at: e.At, span: e.Span}
	switch s := e.Subject.(type) {
	case *event.Message:
		r.topic, r.partition, r.offset, r.key = s.Topic, s.Partition, s.Offset, strings.Clone(s.Key)
		if !e.Span.IsValid() {
			r.trace = tracing.FromHeaders(s.Headers)
		}
		if e.Kind == telemetry.MessageSent {
			r.kind, r.name = sentRecord, MessageSent
			return r, true
		}
		r.kind, r.name = messageRecord, MessageDispatched
		switch e.Kind {
		case telemetry.HandlerSucceeded:
			r.name = MessageSucceeded
		case telemetry.HandlerFailed:
			r.name = MessageFailed
		}
	case *event.Timer:
		r.kind, r.topic, r.partition, r.key, r.timerTime = timerRecord, s.Topic, s.Partition, strings.Clone(s.Key), s.Time
		r.timerType = e.TimerType
		if r.timerType == "" {
			r.timerType = telemetry.TimerApplication
		}
		if !e.Span.IsValid() {
			r.trace = tracing.FieldsOf(s.TraceContext)
		}
		switch e.Kind {
		case telemetry.HandlerInvoked:
			r.name = TimerDispatched
		case telemetry.HandlerSucceeded:
			r.name = TimerSucceeded
		case telemetry.HandlerFailed:
			r.name = TimerFailed
		case telemetry.TimerScheduled:
			r.name = TimerScheduled
		case telemetry.TimerCancelled:
			r.name = TimerCancelled
		default:
			return r, false
		}
	default:
		return r, false
	}
	switch e.Kind {
	case telemetry.HandlerInvoked, telemetry.HandlerSucceeded, telemetry.HandlerFailed:
		r.demand = "normal"
		if e.Failure {
			r.demand = "failure"
		}
	}
	if e.Kind == telemetry.HandlerFailed && e.Err != nil {
		r.failed, r.category, r.exception = true, fault.ClassOf(e.Err).String(), e.Err.Error()
	}
	return r, true
}

// appendRecord appends the JSON document of r to b, with the fields in
// the order of the telemetry schema.
func (id identity) appendRecord(b []byte, r record) []byte {
	b = appendHead(b, r.name, r.at)
	switch r.kind {
	case messageRecord:
		b = appendInt(b, "offset", r.offset)
		b = appendString(b, "topic", r.topic)
		b = appendInt(b, "partition", int64(r.partition))
		b = appendString(b, "key", r.key)
		b = appendString(b, "source", id.group)
		b = appendString(b, "hostname", id.hostname)
		b = appendString(b, "demandType", r.demand)
	case timerRecord:
		b = append(b, `,"scheduledTime":"`...)
		b = r.timerTime.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
		b = append(b, '"')
		b = appendString(b, "timerType", r.timerType)
		b = appendString(b, "topic", r.topic)
		b = appendInt(b, "partition", int64(r.partition))
		b = appendString(b, "key", r.key)
		b = appendString(b, "source", id.group)
		b = appendString(b, "hostname", id.hostname)
		if r.demand != "" {
			b = appendString(b, "demandType", r.demand)
		}
	case sentRecord:
		b = appendString(b, "topic", r.topic)
		b = appendInt(b, "partition", int64(r.partition))
		b = appendInt(b, "offset", r.offset)
		b = appendString(b, "key", r.key)
		b = appendString(b, "source", id.sourceSystem)
		b = appendString(b, "hostname", id.hostname)
	}
	if r.failed {
		b = appendString(b, "errorCategory", r.category)
		b = appendString(b, "exception", r.exception)
	}
	f := r.trace
	if r.span.IsValid() {
		f = tracing.FieldsOfSpan(r.span)
	}
	return append(appendTrace(b, f.TraceParent, f.TraceState), '}')
}

func appendHead(b []byte, name string, at int64) []byte {
	b = append(b, `{"type":`...)
	b = appendQuoted(b, name)
	b = append(b, `,"eventTime":"`...)
	b = telemetry.Wall(at).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
	return append(b, '"')
}

// appendTrace writes the trace context the event happened in; tracestate
// goes with a traceparent even when empty, as the W3C injector writes it.
func appendTrace(b []byte, parent, state string) []byte {
	if parent == "" {
		return b
	}
	b = appendString(b, "traceParent", parent)
	return appendString(b, "traceState", state)
}

func appendString(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendQuoted(b, v)
}

func appendInt(b []byte, name string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

const hexDigits = "0123456789abcdef"

// appendQuoted writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
