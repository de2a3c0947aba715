package filter

import "strings"

// EventTypes is the allowed-events filter: a list of event-type prefixes.
// The zero value allows everything.
type EventTypes struct {
	prefixes []string
}

// NewEventTypes builds the filter from the configured prefixes. A nil or
// empty list configures no filter, so every type is allowed. (Configuration
// rejects an explicitly empty list; an empty environment value arrives here
// as one empty prefix, which matches every type.) The slice is copied.
func NewEventTypes(prefixes []string) EventTypes {
	if len(prefixes) == 0 {
		return EventTypes{}
	}
	return EventTypes{prefixes: append([]string(nil), prefixes...)}
}

// Enabled reports whether an allow list is configured.
func (e EventTypes) Enabled() bool { return e.prefixes != nil }

// Allowed reports whether a message with this event type is processed. A
// message without a type is always processed. Otherwise the type must start
// with one of the prefixes: an anchored, case-sensitive byte comparison with
// no notion of separators, so "user" also matches "username.x". The original
// uses an anchored Aho–Corasick automaton; for the handful of prefixes a
// service configures, a plain loop is equivalent and cheaper.
func (e EventTypes) Allowed(typ string, hasType bool) bool {
	if !hasType || e.prefixes == nil {
		return true
	}
	for _, p := range e.prefixes {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}
