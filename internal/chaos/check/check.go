package check

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/prosody-events/prosody-go/internal/chaos/record"
	"github.com/prosody-events/prosody-go/internal/chaos/workload"
)

// Violation is a broken invariant with the records that show it.
type Violation struct {
	Invariant string   `json:"invariant"`
	Detail    string   `json:"detail"`
	Records   []string `json:"records,omitempty"`
}

// Report is the checker's verdict on one scenario.
type Report struct {
	Meta            Meta           `json:"meta"`
	Events          int            `json:"events"`   // records in the topic
	Produced        int            `json:"produced"` // acknowledged sends
	Handled         int            `json:"handled"`  // handled lines
	Failed          int            `json:"failed"`   // failed attempts (injected faults, cancelled)
	Duplicates      int            `json:"duplicates"`
	TopicDuplicates int            `json:"topic_duplicates"` // one id at two offsets (a retried send)
	Timers          int            `json:"timers"`
	TimerFires      int            `json:"timer_fires"`
	Faults          map[string]int `json:"faults"`
	Recoveries      []float64      `json:"recoveries_s"`
	Violations      []Violation    `json:"violations"`
	Counts          map[string]int `json:"violations_by_invariant"`
}

// maxPerInvariant keeps a report readable when one fault breaks an
// invariant for thousands of events: the rest are counted.
const maxPerInvariant = 5

func (r *Report) violate(inv, detail string, recs ...any) {
	r.Counts[inv]++
	if r.Counts[inv] > maxPerInvariant {
		return
	}
	v := Violation{Invariant: inv, Detail: detail}
	for _, x := range recs {
		b, _ := json.Marshal(x)
		v.Records = append(v.Records, string(b))
	}
	r.Violations = append(r.Violations, v)
}

// OK tells whether every invariant held.
func (r *Report) OK() bool { return len(r.Counts) == 0 }

// Dir checks the scenario whose files are in dir.
func Dir(dir string) (*Report, error) {
	in, err := load(dir)
	if err != nil {
		return nil, err
	}
	return run(in), nil
}

type timerKey struct {
	key string
	at  int64 // unix seconds
}

type keyPart struct {
	p   int32
	key string
}

func run(in *input) *Report {
	r := &Report{Meta: in.meta, Events: len(in.topic), Produced: len(in.produced), Faults: map[string]int{}, Counts: map[string]int{}}
	if in.meta.Errors != "" {
		r.violate("harness", in.meta.Errors)
	}
	for _, f := range in.faults {
		r.Faults[f.Kind]++
	}

	// The topic: each record's payload, the first offset of each id, and
	// each key's offsets in order.
	type topicRec struct {
		workload.TopicRecord
		payload record.Payload
		rank    int64 // 1-based among the key's distinct ids
	}
	byPO := map[int32]map[int64]*topicRec{}
	firstOffset := map[string][2]int64{} // id -> partition, offset
	keyOffsets := map[keyPart][]int64{}
	sort.Slice(in.topic, func(i, j int) bool {
		a, b := in.topic[i], in.topic[j]
		return a.Partition < b.Partition || a.Partition == b.Partition && a.Offset < b.Offset
	})
	ranks := map[keyPart]int64{}
	for _, t := range in.topic {
		tr := &topicRec{TopicRecord: t}
		if err := json.Unmarshal(t.Value, &tr.payload); err != nil {
			r.violate("topic", fmt.Sprintf("an undecodable record at %d/%d: %v", t.Partition, t.Offset, err), t)
			continue
		}
		if byPO[t.Partition] == nil {
			byPO[t.Partition] = map[int64]*topicRec{}
		}
		byPO[t.Partition][t.Offset] = tr
		kp := keyPart{t.Partition, t.Key}
		if _, dup := firstOffset[tr.payload.ID]; dup {
			r.TopicDuplicates++
			tr.rank = ranks[kp]
		} else {
			firstOffset[tr.payload.ID] = [2]int64{int64(t.Partition), t.Offset}
			ranks[kp]++
			tr.rank = ranks[kp]
		}
		keyOffsets[kp] = append(keyOffsets[kp], t.Offset)
	}

	// No acknowledged send is missing from the topic.
	for _, a := range in.produced {
		if _, ok := firstOffset[a.ID]; !ok {
			r.violate("acked-not-in-topic", fmt.Sprintf("event %s (key %s, seq %d) was acknowledged but is not in the topic", a.ID, a.Key, a.Seq), a)
		}
	}

	// The members' records, in the order they were written.
	sort.SliceStable(in.handled, func(i, j int) bool { return in.handled[i].Time < in.handled[j].Time })
	firstHandled := map[string]int64{}    // id -> time
	fails := map[string][]record.Record{} // key -> its failed attempts
	handledPO := map[[2]int64]int{}
	fires := map[timerKey]int64{} // earliest fire
	perKey := map[keyPart][]record.Record{}
	for _, h := range in.handled {
		switch h.Kind {
		case record.Handled:
			r.Handled++
			po := [2]int64{int64(h.Partition), h.Offset}
			handledPO[po]++
			if handledPO[po] > 1 {
				r.Duplicates++
				if !in.meta.Hard {
					r.violate("duplicate", fmt.Sprintf("offset %d/%d (key %s, seq %d) handled %d times after only clean faults", h.Partition, h.Offset, h.Key, h.Seq, handledPO[po]), h)
				}
			}
			if _, ok := firstHandled[h.ID]; !ok {
				firstHandled[h.ID] = h.Time
			}
			kp := keyPart{h.Partition, h.Key}
			perKey[kp] = append(perKey[kp], h)
			if tr := byPO[h.Partition][h.Offset]; tr == nil {
				r.violate("phantom", fmt.Sprintf("handled %d/%d, which the topic does not hold", h.Partition, h.Offset), h)
			} else if tr.payload.ID != h.ID {
				r.violate("phantom", fmt.Sprintf("handled %d/%d as id %s, the topic holds %s there", h.Partition, h.Offset, h.ID, tr.payload.ID), h, tr.TopicRecord)
			} else if h.Count != tr.rank {
				r.violate("counter", fmt.Sprintf("key %s: the counter read %d after event %d/%d, its %d-th distinct event", h.Key, h.Count, h.Partition, h.Offset, tr.rank), h)
			}
		case record.Failed:
			r.Failed++
			fails[h.Key] = append(fails[h.Key], h)
		case record.Fired:
			r.TimerFires++
			k := timerKey{h.Key, h.At}
			if t, ok := fires[k]; !ok || h.Time < t {
				fires[k] = h.Time
			}
		}
	}

	// No loss: every id in the topic handled at least once.
	for _, p := range sortedKeys(byPO) {
		for _, o := range sortedKeys(byPO[p]) {
			tr := byPO[p][o]
			if _, ok := firstHandled[tr.payload.ID]; !ok {
				r.violate("lost", fmt.Sprintf("event %s at %d/%d (key %s, seq %d) never handled", tr.payload.ID, p, o, tr.Key, tr.payload.Seq), tr.TopicRecord)
			}
		}
	}

	// Per-key order: each key's handled offsets follow the topic's order,
	// except a replay of a suffix (after a hard fault) going back and
	// then forward again without a gap.
	for kp, recs := range perKey {
		offs := keyOffsets[kp]
		index := make(map[int64]int, len(offs))
		for i, o := range offs {
			index[o] = i
		}
		next := 0
		for j, h := range recs {
			i, ok := index[h.Offset]
			if !ok {
				continue // not in the topic: reported as a phantom above
			}
			switch {
			case i == next:
				next++
			case i < next:
				if !in.meta.Hard {
					r.violate("order", fmt.Sprintf("key %s: offset %d handled again after offset %d, with only clean faults", kp.key, h.Offset, offs[next-1]), recs[max(0, j-1)], h)
				}
				next = i + 1
			default:
				// Skipped offsets are fine only when each is a second copy
				// of an id handled at an earlier offset (deduplicated).
				for k := next; k < i; k++ {
					tr := byPO[kp.p][offs[k]]
					first := firstOffset[tr.payload.ID]
					if first[1] == offs[k] {
						r.violate("order", fmt.Sprintf("key %s: offset %d handled before offset %d", kp.key, h.Offset, offs[k]), h, tr.TopicRecord)
						break
					}
				}
				next = i + 1
			}
		}
	}

	// Timers: each requested one fired, never before its time.
	want := map[timerKey]bool{}
	for _, byO := range byPO {
		for _, tr := range byO {
			if tr.payload.Timer > 0 {
				want[timerKey{tr.Key, tr.payload.Timer}] = true
			}
		}
	}
	r.Timers = len(want)
	keys := make([]timerKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b timerKey) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.at, b.at)) })
	for _, k := range keys {
		t, ok := fires[k]
		switch {
		case !ok:
			r.violate("timer-not-fired", fmt.Sprintf("timer of key %s at %d never fired", k.key, k.at))
		case t < k.at*int64(time.Second):
			r.violate("timer-early", fmt.Sprintf("timer of key %s at %d fired %v early", k.key, k.at, time.Duration(k.at*int64(time.Second)-t)))
		}
	}

	// Committed offsets never pass unhandled work. An offset may be
	// committed unhandled only when its key may be deferred (committed
	// once stored, §1(c)): an earlier or the same offset of the key had
	// failed before the commit. The loss check still finds a deferred
	// event that is never handled.
	sort.SliceStable(in.commits, func(i, j int) bool { return in.commits[i].Time < in.commits[j].Time })
	checked := map[int32]int64{}
	broken := map[int32]bool{}
	for _, c := range in.commits {
		if broken[c.Partition] {
			continue
		}
		for o := checked[c.Partition]; o < c.Offset; o++ {
			tr := byPO[c.Partition][o]
			if tr == nil {
				r.violate("commit-past-end", fmt.Sprintf("committed %d on partition %d, past its record %d", c.Offset, c.Partition, o), c)
				broken[c.Partition] = true
				break
			}
			if t, ok := firstHandled[tr.payload.ID]; ok && t <= c.Time {
				continue
			}
			if deferredAt(fails[tr.Key], o, c.Time) {
				continue
			}
			r.violate("commit-past-unhandled", fmt.Sprintf("offset %d committed on partition %d while %d (key %s, seq %d) was not handled yet",
				c.Offset, c.Partition, o, tr.Key, tr.payload.Seq), c, tr.TopicRecord)
			broken[c.Partition] = true
			break
		}
		if !broken[c.Partition] && c.Offset > checked[c.Partition] {
			checked[c.Partition] = c.Offset
		}
	}

	// Recovery: from each fault's end until every event acknowledged
	// before it was handled, less the time other faults were in effect
	// in between: events could not be handled while the next outage
	// lasted, and charging that to the first would count one outage
	// twice. What is left is the time the client itself took; a fault of
	// an instant (a connection reset) excuses nothing.
	done := make([]int64, len(in.faults))
	for i, f := range in.faults {
		done[i] = f.End
		for _, a := range in.produced {
			if a.Time > f.End {
				continue
			}
			if t, ok := firstHandled[a.ID]; ok && t > done[i] {
				done[i] = t
			}
		}
	}
	for i, f := range in.faults {
		if f.End == 0 {
			continue
		}
		took := done[i] - f.End - othersWithin(in.faults, i, f.End, done[i])
		r.Recoveries = append(r.Recoveries, time.Duration(took).Seconds())
		if in.meta.Bound > 0 && took > in.meta.Bound {
			r.violate("slow-recovery", fmt.Sprintf("%s (%s): events sent before its end took %v to be handled, over the bound %v",
				f.Kind, f.Detail, time.Duration(took).Round(time.Millisecond), time.Duration(in.meta.Bound)), f)
		}
	}
	if in.meta.Lag != 0 {
		r.violate("lag", fmt.Sprintf("the group's lag was %d, not 0, when the members were stopped", in.meta.Lag))
	}
	return r
}

// othersWithin is how long faults other than i were in effect between
// from and to, time covered by several counted once.
func othersWithin(faults []Fault, i int, from, to int64) int64 {
	type span struct{ start, end int64 }
	var spans []span
	for j, g := range faults {
		end := g.End
		if end == 0 { // never over: in effect until the end
			end = to
		}
		if j == i || end <= from || g.Start >= to {
			continue
		}
		spans = append(spans, span{max(g.Start, from), min(end, to)})
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].start < spans[b].start })
	var total, reach int64 = 0, from
	for _, sp := range spans {
		if sp.end <= reach {
			continue
		}
		total += sp.end - max(sp.start, reach)
		reach = sp.end
	}
	return total
}

// deferredAt tells whether, at time t, the key whose failed attempts are
// fails may have been deferred at or before offset o: one of its offsets
// up to o had failed by then. A deferred key's queue drains after its
// head succeeds, so the failed event itself may be handled already.
func deferredAt(fails []record.Record, o, t int64) bool {
	for _, f := range fails {
		if f.Offset <= o && f.Time <= t {
			return true
		}
	}
	return false
}

func sortedKeys[K int32 | int64 | string, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
