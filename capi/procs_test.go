//go:build capitest

package main

import (
	"runtime"
	"testing"
)

func TestProcsFollowSubscriptions(t *testing.T) {
	fixed, base, direct, polling, savedProcs := procs.fixed, procs.base, procs.direct, procs.polling, runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		procs.fixed, procs.base, procs.direct, procs.polling = fixed, base, direct, polling
		runtime.GOMAXPROCS(savedProcs)
	})
	procs.fixed, procs.base, procs.direct, procs.polling = false, 2, 0, 0
	applyProcs()
	steps := []struct {
		name     string
		was, now consumerKind
		want     int
	}{
		{"nothing subscribed: one P for the hosts' threads", consumerNone, consumerNone, 3},
		{"an on_event subscription alone", consumerNone, consumerDirect, 2},
		{"a polling one beside it", consumerNone, consumerPolling, 3},
		{"the polling one ends", consumerPolling, consumerNone, 2},
		{"a second on_event one", consumerNone, consumerDirect, 2},
		{"one of the two ends", consumerDirect, consumerNone, 2},
		{"none left", consumerDirect, consumerNone, 3},
	}
	for _, s := range steps {
		consumerChanged(s.was, s.now)
		if got := runtime.GOMAXPROCS(0); got != s.want {
			t.Fatalf("%s: GOMAXPROCS %d, want %d (direct %d, polling %d)", s.name, got, s.want, procs.direct, procs.polling)
		}
	}
	procs.fixed = true // GOMAXPROCS in the environment: left alone
	consumerChanged(consumerNone, consumerDirect)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("with GOMAXPROCS fixed: %d, want 3", got)
	}
}
