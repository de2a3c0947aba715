package emitter

import (
	"strconv"
	"unicode/utf8"

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

// appendRecord appends the JSON document of e to b, with the fields in the
// order of the telemetry schema, and returns it with the record's key. ok
// is false for an event that is not serialised (one without a subject).
func (id identity) appendRecord(b []byte, e telemetry.Event) (out []byte, key string, ok bool) {
	switch s := e.Subject.(type) {
	case *event.Message:
		if e.Kind == telemetry.MessageSent {
			return id.appendSent(b, e, s), s.Key, true
		}
		return id.appendMessage(b, e, s), s.Key, true
	case *event.Timer:
		return id.appendTimer(b, e, s), s.Key, true
	}
	return b, "", false
}

func (id identity) appendMessage(b []byte, e telemetry.Event, m *event.Message) []byte {
	name := MessageDispatched
	switch e.Kind {
	case telemetry.HandlerSucceeded:
		name = MessageSucceeded
	case telemetry.HandlerFailed:
		name = MessageFailed
	}
	b = appendHead(b, name, e.At)
	b = appendInt(b, "offset", m.Offset)
	b = appendString(b, "topic", m.Topic)
	b = appendInt(b, "partition", int64(m.Partition))
	b = appendString(b, "key", m.Key)
	b = appendString(b, "source", id.group)
	b = appendString(b, "hostname", id.hostname)
	b = appendString(b, "demandType", demand(e))
	b = appendFailure(b, e)
	f := tracing.FromHeaders(m.Headers)
	return append(appendTrace(b, f.TraceParent, f.TraceState), '}')
}

func (id identity) appendTimer(b []byte, e telemetry.Event, t *event.Timer) []byte {
	name, handler := TimerDispatched, true
	switch e.Kind {
	case telemetry.HandlerSucceeded:
		name = TimerSucceeded
	case telemetry.HandlerFailed:
		name = TimerFailed
	case telemetry.TimerScheduled:
		name, handler = TimerScheduled, false
	case telemetry.TimerCancelled:
		name, handler = TimerCancelled, false
	}
	typ := e.TimerType
	if typ == "" {
		typ = telemetry.TimerApplication
	}
	b = appendHead(b, name, e.At)
	b = append(b, `,"scheduledTime":"`...)
	b = t.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
	b = append(b, '"')
	b = appendString(b, "timerType", typ)
	b = appendString(b, "topic", t.Topic)
	b = appendInt(b, "partition", int64(t.Partition))
	b = appendString(b, "key", t.Key)
	b = appendString(b, "source", id.group)
	b = appendString(b, "hostname", id.hostname)
	if handler {
		b = appendString(b, "demandType", demand(e))
		b = appendFailure(b, e)
	}
	f := tracing.FieldsOf(t.TraceContext)
	return append(appendTrace(b, f.TraceParent, f.TraceState), '}')
}

func (id identity) appendSent(b []byte, e telemetry.Event, m *event.Message) []byte {
	b = appendHead(b, MessageSent, e.At)
	b = appendString(b, "topic", m.Topic)
	b = appendInt(b, "partition", int64(m.Partition))
	b = appendInt(b, "offset", m.Offset)
	b = appendString(b, "key", m.Key)
	b = appendString(b, "source", id.sourceSystem)
	b = appendString(b, "hostname", id.hostname)
	f := tracing.FromHeaders(m.Headers)
	return append(appendTrace(b, f.TraceParent, f.TraceState), '}')
}

func demand(e telemetry.Event) string {
	if e.Failure {
		return "failure"
	}
	return "normal"
}

func appendHead(b []byte, name string, at int64) []byte {
	b = append(b, `{"type":`...)
	b = appendQuoted(b, name)
	b = append(b, `,"eventTime":"`...)
	b = telemetry.Wall(at).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
	return append(b, '"')
}

// appendFailure writes a failed call's error class and text.
func appendFailure(b []byte, e telemetry.Event) []byte {
	if e.Kind != telemetry.HandlerFailed || e.Err == nil {
		return b
	}
	b = appendString(b, "errorCategory", fault.ClassOf(e.Err).String())
	return appendString(b, "exception", e.Err.Error())
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
