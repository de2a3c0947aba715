package main

import (
	"os"
	"runtime"
	"sync"
)

// The library's number of Go processors (Ps).
//
// A host thread that calls into the library keeps a P while it runs its
// own code between calls, and goroutines its calls wake are queued on that
// P until the runtime takes it back. While hosts poll (the Python and Node
// bindings, C hosts without on_event), one P more than the runtime's
// default makes up for theirs: measured with make bench-c, 8-15 % more
// events per second. An on_event handler runs on the library's own
// goroutines and its host makes no calls in between, so there the extra P
// only adds a thread competing for the CPUs: 7-10 % fewer events per
// second (alternating runs of the C benchmark). So the extra P is given up
// while every running subscription of the process uses on_event, and kept
// otherwise. An explicit GOMAXPROCS in the environment is left alone.
var procs struct {
	mu      sync.Mutex
	fixed   bool // GOMAXPROCS was set in the environment
	base    int  // the runtime's default
	direct  int  // running subscriptions with on_event
	polling int  // running subscriptions without
}

// consumerKind is what a client's running subscription is, for procs.
type consumerKind uint8

const (
	consumerNone consumerKind = iota
	consumerPolling
	consumerDirect
)

func initProcs() {
	procs.fixed = os.Getenv("GOMAXPROCS") != ""
	procs.base = runtime.GOMAXPROCS(0)
	applyProcs()
}

// consumerChanged records that a client's subscription went from was to
// now and sets the number of Ps accordingly.
func consumerChanged(was, now consumerKind) {
	if was == now {
		return
	}
	procs.mu.Lock()
	defer procs.mu.Unlock()
	count(was, -1)
	count(now, +1)
	applyProcs()
}

func count(k consumerKind, d int) {
	switch k {
	case consumerDirect:
		procs.direct += d
	case consumerPolling:
		procs.polling += d
	}
}

// applyProcs sets GOMAXPROCS from the counts. The caller holds procs.mu,
// or is init.
func applyProcs() {
	if procs.fixed {
		return
	}
	want := procs.base + 1
	if procs.direct > 0 && procs.polling == 0 {
		want = procs.base
	}
	if runtime.GOMAXPROCS(0) != want {
		runtime.GOMAXPROCS(want)
	}
}
