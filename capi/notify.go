package main

/*
#include "shims.h"
*/
import "C"

import "sync"

// notifier is one subscription's notify callback. Its calls never overlap
// or nest: a wake-up that comes while a call runs (from another thread, or
// from the host completing events inside the call, which can queue the
// key's next event) makes the running call's thread call it once more when
// it returns. So a host that completes events from inside notify does not
// recurse once per event, and removing the callback waits for one call at
// most.
type notifier struct {
	fn C.prosody_notify_fn
	ud C.uintptr_t

	// Guarded by notifiers.mu.
	calling bool // a call runs
	again   bool // a wake-up came while it ran
	removed bool
}

// notifiers holds a dispatcher's current notify callback. No lock is held
// during a call, since notify may call back into the library. Initialise
// with init.
type notifiers struct {
	mu      sync.Mutex
	idle    sync.Cond // broadcast when a call ends
	current *notifier
}

// install makes fn (NULL: none) the callback for wake-ups from now on and
// returns its token for remove. It never waits: a subscribe may run inside
// the previous subscription's notify.
func (ns *notifiers) install(fn C.prosody_notify_fn, ud C.uintptr_t) *notifier {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if fn == nil {
		ns.current = nil
		return nil
	}
	ns.current = &notifier{fn: fn, ud: ud}
	return ns.current
}

// remove stops n's calls (it stays installed only if a later install
// replaced it already) and returns once no call of n runs, so that the host
// may free n's user_data when the unsubscribe or release completes. Only
// library goroutines call it, never a notify call. nil is a no-op.
func (ns *notifiers) remove(n *notifier) {
	if n == nil {
		return
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.current == n {
		ns.current = nil
	}
	n.removed = true
	for n.calling {
		ns.idle.Wait()
	}
}

// removeCurrent removes whatever callback is installed (client release).
func (ns *notifiers) removeCurrent() {
	ns.mu.Lock()
	n := ns.current
	ns.mu.Unlock()
	ns.remove(n)
}

// call calls the current callback for a wake-up, or marks the running
// call to repeat.
func (ns *notifiers) call() {
	ns.mu.Lock()
	n := ns.current
	if n == nil {
		ns.mu.Unlock()
		return
	}
	if n.calling {
		n.again = true
		ns.mu.Unlock()
		return
	}
	n.calling = true
	for {
		n.again = false
		ns.mu.Unlock()
		C.prosodyInt_call_notify(n.fn, n.ud)
		ns.mu.Lock()
		if !n.again || n.removed {
			break
		}
	}
	n.calling = false
	ns.idle.Broadcast()
	ns.mu.Unlock()
}

func (ns *notifiers) init() { ns.idle.L = &ns.mu }
