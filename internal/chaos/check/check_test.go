package check

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/internal/chaos/record"
	"github.com/prosody-events/prosody-go/internal/chaos/workload"
)

// history is one key's three events on partition 0, handled in order by
// one member, committed after each, with a timer on the second.
func history() *input {
	in := &input{meta: Meta{Name: "t", Kind: "sigterm"}}
	base := time.Unix(1000, 0).UnixNano()
	for i := int64(0); i < 3; i++ {
		p := record.Payload{ID: "k-" + string(rune('a'+i)), Seq: i + 1}
		if i == 1 {
			p.Timer = 1005
		}
		v, _ := json.Marshal(p)
		in.topic = append(in.topic, workload.TopicRecord{Partition: 0, Offset: i, Key: "k", Value: v})
		in.produced = append(in.produced, workload.Ack{ID: p.ID, Key: "k", Seq: p.Seq, Timer: p.Timer, Time: base})
		t := base + (i+1)*int64(time.Second)
		in.handled = append(in.handled, record.Record{Kind: record.Handled, Member: "m", Time: t, Partition: 0, Offset: i, Key: "k", Seq: p.Seq, ID: p.ID, Count: i + 1})
		in.commits = append(in.commits, workload.Commit{Time: t + 1, Partition: 0, Offset: i + 1})
	}
	in.handled = append(in.handled, record.Record{Kind: record.Fired, Member: "m", Time: time.Unix(1005, 1).UnixNano(), Key: "k", At: 1005})
	return in
}

func violations(t *testing.T, in *input) map[string]int {
	t.Helper()
	return run(in).Counts
}

func TestCleanHistoryPasses(t *testing.T) {
	if got := violations(t, history()); len(got) != 0 {
		t.Fatalf("violations in a clean history: %v", got)
	}
}

func TestEachInvariantIsCaught(t *testing.T) {
	cases := map[string]func(in *input){
		"lost": func(in *input) { in.handled = in.handled[1:] },
		"duplicate": func(in *input) {
			d := in.handled[0]
			d.Time = in.handled[2].Time + 1
			in.handled = append(in.handled, d)
		},
		"order":   func(in *input) { in.handled[0].Time, in.handled[1].Time = in.handled[1].Time, in.handled[0].Time },
		"counter": func(in *input) { in.handled[2].Count = 4 },
		"commit-past-unhandled": func(in *input) {
			in.commits = append(in.commits, workload.Commit{Time: in.handled[0].Time - 1, Partition: 0, Offset: 1})
		},
		"timer-early":        func(in *input) { in.handled[3].Time = time.Unix(1004, 0).UnixNano() },
		"timer-not-fired":    func(in *input) { in.handled = in.handled[:3] },
		"acked-not-in-topic": func(in *input) { in.produced = append(in.produced, workload.Ack{ID: "gone", Key: "k"}) },
		"lag":                func(in *input) { in.meta.Lag = 2 },
		"phantom":            func(in *input) { in.topic = nil },
	}
	for want, breakIt := range cases {
		t.Run(want, func(t *testing.T) {
			in := history()
			breakIt(in)
			if got := violations(t, in); got[want] == 0 {
				t.Fatalf("want a %s violation, got %v", want, got)
			}
		})
	}
}

// After a hard fault a replayed suffix is allowed (and counted as
// duplicates); a gap is not.
func TestReplayAfterHardFault(t *testing.T) {
	in := history()
	in.meta.Hard = true
	for _, i := range []int{1, 2} {
		d := in.handled[i]
		d.Time = in.handled[2].Time + int64(i)
		in.handled = append(in.handled, d)
	}
	r := run(in)
	if !r.OK() || r.Duplicates != 2 {
		t.Fatalf("a replayed suffix: violations %v, duplicates %d (want none, 2)", r.Counts, r.Duplicates)
	}
}

// A key with a failed attempt on record may have its offset committed
// before it is handled: the deferral stored it.
func TestDeferredKeyExcusesTheCommit(t *testing.T) {
	in := history()
	in.handled = append(in.handled, record.Record{Kind: record.Failed, Time: in.handled[0].Time - 10, Key: "k", Offset: 0})
	in.commits = append(in.commits, workload.Commit{Time: in.handled[0].Time - 1, Partition: 0, Offset: 1})
	if got := violations(t, in); len(got) != 0 {
		t.Fatalf("violations: %v", got)
	}
}

// A key's failure excuses commits only of offsets from it on: the event
// before it was not deferred.
func TestAFailureExcusesNoEarlierOffset(t *testing.T) {
	in := history()
	in.handled = append(in.handled, record.Record{Kind: record.Failed, Time: in.handled[0].Time, Key: "k", Offset: 2, ID: "k-c"})
	// Offset 1 is handled at base+2s; a commit of 2 at base+1.5s passes it.
	in.commits = append(in.commits, workload.Commit{Time: in.handled[1].Time - int64(time.Second/2), Partition: 0, Offset: 2})
	if got := violations(t, in); got["commit-past-unhandled"] == 0 {
		t.Fatalf("want a commit-past-unhandled violation, got %v", got)
	}
}

// A fault that a second one follows before it has recovered is measured
// with the second, from its end; one that recovered first is measured on
// its own.
func TestRecoveryOfFaultsInARow(t *testing.T) {
	sec := int64(time.Second)
	in := history()
	base := in.produced[0].Time
	in.meta.Bound = int64(20 * time.Second)
	// All three events are sent at base and handled at base+1s, +2s, +3s:
	// a fault ending at base+½s has recovered at base+3s.
	in.faults = []Fault{
		{Kind: "cassandra", Start: base - sec, End: base + sec/2},
		{Kind: "cassandra", Start: base + sec, End: base + 2*sec + sec/2},
	}
	r := run(in)
	// The first: 2.5 s to base+3s less the second's 1.5 s; the second: 0.5 s.
	if len(r.Recoveries) != 2 || r.Recoveries[0] != 1 || r.Recoveries[1] != 0.5 {
		t.Fatalf("recoveries %v, want [1 0.5]: the time of the fault in between is not charged to the first", r.Recoveries)
	}
	in.faults[1].Start = base + 3*sec + 1
	in.faults[1].End = base + 4*sec
	r = run(in)
	if len(r.Recoveries) != 2 || r.Recoveries[0] != 2.5 || r.Recoveries[1] != 0 {
		t.Fatalf("recoveries %v, want [2.5 0]", r.Recoveries)
	}
	in.meta.Bound = int64(2 * time.Second)
	if got := run(in).Counts["slow-recovery"]; got != 1 {
		t.Fatalf("slow-recovery violations: %d, want 1", got)
	}
}

// A fault of an instant that follows a slow recovery does not excuse it.
func TestSlowRecoveryNotHiddenByAReset(t *testing.T) {
	sec := int64(time.Second)
	in := history()
	base := in.produced[0].Time
	in.meta.Bound = int64(2 * time.Second)
	in.faults = []Fault{
		{Kind: "network", Start: base - sec, End: base + sec/2, Detail: "cassandra refused"},
		{Kind: "network", Start: base + sec, End: base + sec, Detail: "kafka reset"},
	}
	r := run(in)
	if r.Counts["slow-recovery"] != 1 || r.Recoveries[0] != 2.5 {
		t.Fatalf("recoveries %v, violations %v: want the refusal's 2.5 s reported as slow", r.Recoveries, r.Counts)
	}
}
