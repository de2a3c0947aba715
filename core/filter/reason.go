package filter

// Reason says why a record was not handed to the handler. Its String value is
// the `reason` attribute of the `message.filtered` span (spec §9) and the
// label of the skip and undecodable-record counters.
type Reason uint8

// The zero Reason is deliberately invalid so an unset reason stands out.
const (
	_ Reason = iota

	// Filters (spec §3.5, §4.3, §6); the strings are fixed by the spec.

	ReasonStale            // rewind filter: offset not above the highest seen
	ReasonSourceSystemLoop // source-system header equals the group id
	ReasonEventType        // type matches no allowed-events prefix
	ReasonDeduplicated     // consumer dedup middleware saw the message before
	ReasonDuplicateEventID // producer id cache suppressed a send

	// Undecodable records (spec §3.4, §1 (f)). The spec names the failures
	// but not the strings; these are ours.

	ReasonNoKey       // record has no key
	ReasonKeyNotUTF8  // key is not valid UTF-8
	ReasonNullPayload // value is null (tombstone)
	ReasonInvalidJSON // value is not a JSON document
	reasonEnd
)

// NumReasons bounds the valid reasons: each is below it.
const NumReasons = int(reasonEnd)

var reasonNames = [reasonEnd]string{
	ReasonStale:            "stale",
	ReasonSourceSystemLoop: "source-system-loop",
	ReasonEventType:        "event-type",
	ReasonDeduplicated:     "deduplicated",
	ReasonDuplicateEventID: "duplicate-event-id",
	ReasonNoKey:            "no-key",
	ReasonKeyNotUTF8:       "key-not-utf8",
	ReasonNullPayload:      "null-payload",
	ReasonInvalidJSON:      "invalid-json",
}

// String returns the reason's wire name, or "unknown" for an invalid value.
func (r Reason) String() string {
	if r == 0 || r >= reasonEnd {
		return "unknown"
	}
	return reasonNames[r]
}

// Undecodable reports whether the reason is a decoding failure, i.e. the
// record is logged, counted and (in low-latency mode) dead-lettered rather
// than filtered.
func (r Reason) Undecodable() bool {
	return r >= ReasonNoKey && r < reasonEnd
}
