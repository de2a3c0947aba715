package emitter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// field is one field of a telemetry document, as the schema lists it.
type field struct {
	name     string
	kind     fieldKind
	optional bool
}

type fieldKind uint8

const (
	text      fieldKind = iota
	number              // an integer
	eventTime           // RFC 3339, milliseconds, Z
	timerTime           // RFC 3339, seconds, Z
	demandKind
	categoryKind
	timerKind
)

var (
	traceFields   = []field{{"traceParent", text, true}, {"traceState", text, true}}
	failureFields = []field{{"errorCategory", categoryKind, true}, {"exception", text, true}}

	messageSchema = join([]field{{"type", text, false}, {"eventTime", eventTime, false}, {"offset", number, false},
		{"topic", text, false}, {"partition", number, false}, {"key", text, false}, {"source", text, false},
		{"hostname", text, false}, {"demandType", demandKind, false}}, failureFields, traceFields)
	timerSchema = join([]field{{"type", text, false}, {"eventTime", eventTime, false}, {"scheduledTime", timerTime, false},
		{"timerType", timerKind, false}, {"topic", text, false}, {"partition", number, false}, {"key", text, false},
		{"source", text, false}, {"hostname", text, false}, {"demandType", demandKind, true}}, failureFields, traceFields)
	sentSchema = join([]field{{"type", text, false}, {"eventTime", eventTime, false}, {"topic", text, false},
		{"partition", number, false}, {"offset", number, false}, {"key", text, false}, {"source", text, false},
		{"hostname", text, false}}, traceFields)
)

func join(parts ...[]field) []field {
	var all []field
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

// schemaOf is the schema of the event named name.
func schemaOf(name string) ([]field, bool) {
	switch name {
	case MessageDispatched, MessageSucceeded, MessageFailed:
		return messageSchema, true
	case TimerScheduled, TimerCancelled, TimerDispatched, TimerSucceeded, TimerFailed:
		return timerSchema, true
	case MessageSent:
		return sentSchema, true
	}
	return nil, false
}

// Check validates a telemetry document against the documented schema
// (fields in order, optional ones left out only where allowed, values of
// the right form) and returns its event name. Consumers of the telemetry
// topic can use it; the tests check every record with it.
func Check(doc []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", errors.New("telemetry document: not a JSON object")
	}
	var names []string
	values := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("telemetry document: %w", err)
		}
		name := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", fmt.Errorf("telemetry document: field %q: %w", name, err)
		}
		if _, dup := values[name]; dup {
			return "", fmt.Errorf("telemetry document: field %q twice", name)
		}
		names = append(names, name)
		values[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return "", fmt.Errorf("telemetry document: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("telemetry document: data after the object")
	}
	typ, _ := values["type"].(string)
	schema, ok := schemaOf(typ)
	if !ok {
		return "", fmt.Errorf("telemetry document: unknown type %q", typ)
	}
	i := 0
	for _, f := range schema {
		if i < len(names) && names[i] == f.name {
			if err := checkValue(f, values[f.name]); err != nil {
				return typ, fmt.Errorf("%s: field %q: %w", typ, f.name, err)
			}
			i++
			continue
		}
		if !f.optional {
			return typ, fmt.Errorf("%s: field %q missing or out of order (fields: %v)", typ, f.name, names)
		}
	}
	if i != len(names) {
		return typ, fmt.Errorf("%s: unexpected field %q (fields: %v)", typ, names[i], names)
	}
	if err := checkPresence(typ, values); err != nil {
		return typ, err
	}
	return typ, nil
}

// checkPresence checks what the order alone cannot: which optional fields
// an event of typ must or must not have.
func checkPresence(typ string, values map[string]any) error {
	_, hasDemand := values["demandType"]
	_, hasCategory := values["errorCategory"]
	_, hasException := values["exception"]
	_, hasParent := values["traceParent"]
	_, hasState := values["traceState"]
	failed := typ == MessageFailed || typ == TimerFailed
	switch {
	case (typ == TimerScheduled || typ == TimerCancelled) && hasDemand:
		return fmt.Errorf("%s: has a demandType", typ)
	case typ != TimerScheduled && typ != TimerCancelled && typ != MessageSent && !hasDemand:
		return fmt.Errorf("%s: has no demandType", typ)
	case failed != hasCategory || failed != hasException:
		return fmt.Errorf("%s: errorCategory and exception belong to failed events only, and both", typ)
	case hasParent != hasState:
		return fmt.Errorf("%s: traceParent and traceState go together", typ)
	}
	return nil
}

func checkValue(f field, v any) error {
	switch f.kind {
	case number:
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%v is not a number", v)
		}
		if _, err := n.Int64(); err != nil {
			return fmt.Errorf("%v is not an integer", v)
		}
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%v is not a string", v)
	}
	switch f.kind {
	case eventTime:
		return checkTime(s, "2006-01-02T15:04:05.000Z")
	case timerTime:
		return checkTime(s, "2006-01-02T15:04:05Z")
	case demandKind:
		return oneOf(s, "normal", "failure")
	case categoryKind:
		return oneOf(s, "transient", "permanent", "terminal")
	case timerKind:
		return oneOf(s, "application", "deferredMessage", "deferredTimer")
	}
	return nil
}

func checkTime(s, layout string) error {
	t, err := time.Parse(layout, s)
	if err != nil || t.Format(layout) != s {
		return fmt.Errorf("%q is not of the form %s", s, layout)
	}
	return nil
}

func oneOf(s string, allowed ...string) error {
	for _, a := range allowed {
		if s == a {
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %v", s, allowed)
}
