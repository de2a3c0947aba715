package main

import (
	"strings"
	"testing"
)

// The happy path is `go run ./cmd/prosody-demo`; these cover the failure
// reports, which a healthy mock cluster never produces.

func TestTrackerReportsOrderViolation(t *testing.T) {
	tr := newTracker(map[string]*keyLog{"k": {partition: 1, seqs: []int{1, 2, 3}}})
	tr.record("k", 1, 0, 1)
	tr.record("k", 1, 1, 3)
	if done := tr.record("k", 1, 2, 2); !done {
		t.Fatal("record did not report completion after all seqs were seen")
	}
	if tr.err() == nil {
		t.Fatal("err() = nil despite an order violation")
	}
	if s := tr.summary(nil, 0); !strings.Contains(s, "key order    FAILED") || !strings.Contains(s, "k: seq 2 after seq 3") {
		t.Fatalf("summary does not report the violation:\n%s", s)
	}
}

func TestTrackerReportsMissingAndUnexpected(t *testing.T) {
	tr := newTracker(map[string]*keyLog{"k": {partition: 0, seqs: []int{1, 2}}})
	tr.record("k", 0, 0, 1)
	tr.record("other", 0, 1, 9)
	if tr.complete() {
		t.Fatal("complete() with a message missing")
	}
	if tr.err() == nil {
		t.Fatal("err() = nil despite missing and unexpected messages")
	}
	s := tr.summary(nil, 0)
	for _, want := range []string{"completeness FAILED", "k: 1 of 2 missing", "unexpected   1", "key order    OK"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}
