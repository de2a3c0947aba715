package timerstore

import (
	"context"
	"slices"
)

// keyTimerState is the user type key_timer_state: the per-type entry of the
// static `state` map in timer_typed_keys.
//
// With Inline set, the type has exactly one timer, held here and nowhere
// else in the key partition. Without it the entry is an overflow marker:
// two or more timers, held as clustering rows. No entry means no timers.
type keyTimerState struct {
	Inline bool              `cql:"inline"`
	Time   int32             `cql:"time"`
	Span   map[string]string `cql:"span"`
}

type keyForm uint8

const (
	formAbsent keyForm = iota
	formInline
	formOverflow
)

type keyEntry struct {
	time Time
	span map[string]string
}

// keyPartition is one key's partition of timer_typed_keys, every type.
type keyPartition struct {
	state map[int8]keyTimerState
	rows  map[Type][]keyEntry
}

// readKey reads the whole key partition in one query: the static state and
// every clustering row. Partitions are small (a key rarely has many timers),
// and one query sees state and rows at the same moment.
func (s *cassandraSegment) readKey(ctx context.Context, key string) (keyPartition, error) {
	kp := keyPartition{rows: map[Type][]keyEntry{}}
	iter := s.store.s.Query(ctx, s.store.q.selectKey, s.id, key).Iter()
	for {
		var state map[int8]keyTimerState
		var typ *int8
		var at *int32
		var span map[string]string
		if !iter.Scan(&state, &typ, &at, &span) {
			break
		}
		if kp.state == nil {
			kp.state = state
		}
		// A partition with only static data yields one row whose
		// clustering columns are null.
		if typ != nil && at != nil {
			t := Type(*typ)
			kp.rows[t] = append(kp.rows[t], keyEntry{time: Time(uint32(*at)), span: cloneSpan(span)})
		}
	}
	if err := iter.Close(); err != nil {
		return kp, wrap(err, "read key index of %q", key)
	}
	return kp, nil
}

// entries returns the form and the timers of one type. Clustering rows with
// no state entry (written by the version 2 layout, or left when a marker
// expired early) are treated as overflow, so no stored timer is ever
// ignored; the next write adds the marker.
func (kp keyPartition) entries(typ Type) (keyForm, []keyEntry) {
	rows := slices.Clone(kp.rows[typ])
	slices.SortFunc(rows, func(a, b keyEntry) int { return cmpTime(a.time, b.time) })
	st, ok := kp.state[int8(typ)]
	switch {
	case ok && st.Inline:
		return formInline, []keyEntry{{time: Time(uint32(st.Time)), span: cloneSpan(st.Span)}}
	case ok || len(rows) > 0:
		return formOverflow, rows
	}
	return formAbsent, nil
}

func cmpTime(a, b Time) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func times(es []keyEntry) []Time {
	out := make([]Time, len(es))
	for i, e := range es {
		out[i] = e.time
	}
	return out
}

func inlineState(at Time, span map[string]string) keyTimerState {
	return keyTimerState{Inline: true, Time: int32(at), Span: spanValue(span)}
}

// overflowState is the overflow marker. Its time is the latest timer so the
// entry always carries a valid value for readers that expect one.
func overflowState(latest Time) keyTimerState {
	return keyTimerState{Inline: false, Time: int32(latest), Span: map[string]string{}}
}

// spanValue writes an empty map rather than null, so readers that expect a
// map (not an optional one) can always decode the column.
func spanValue(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
