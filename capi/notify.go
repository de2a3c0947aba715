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
}

// notifiers holds a dispatcher's current notify callback. No lock is held
// during a call, since notify may call back into the library. Initialise
// with init.
type notifiers struct {
	mu      sync.Mutex
	idle    sync.Cond // broadcast when a call ends
	current *notifier
	running int  // calls in progress, of any notifier
	closed  bool // the client was released: nothing more is installed
}

func (ns *notifiers) init() { ns.idle.L = &ns.mu }

// install makes fn (NULL: none) the callback for wake-ups from now on and
// returns its token for remove. It never waits: a subscribe may run inside
// the previous subscription's notify.
func (ns *notifiers) install(fn C.prosody_notify_fn, ud C.uintptr_t) *notifier {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if fn == nil || ns.closed {
		ns.current = nil
		return nil
	}
	ns.current = &notifier{fn: fn, ud: ud}
	return ns.current
}

// remove stops n's calls (unless a later install replaced it already) and
// returns once no call of n runs, so that the host may free n's user_data
// when the unsubscribe completes. Only library goroutines call it, never a
// notify call. nil is a no-op.
func (ns *notifiers) remove(n *notifier) {
	if n == nil {
		return
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.current == n {
		ns.current = nil
	}
	for n.calling {
		ns.idle.Wait()
	}
}

// close removes the callback for good (client release) and returns once no
// call of any subscription's callback runs: the host may free every
// user_data it gave when the release completes.
func (ns *notifiers) close() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.closed = true
	ns.current = nil
	for ns.running > 0 {
		ns.idle.Wait()
	}
}

// call calls the current callback for a wake-up, or has the running call
// of it repeat.
func (ns *notifiers) call() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for {
		n := ns.current
		if n == nil {
			return
		}
		if n.calling {
			n.again = true
			return
		}
		if !ns.run(n) {
			return
		}
		// A wake-up came during the call, and n is no longer the
		// callback: it goes to the one that replaced n, if any.
	}
}

// run calls n, once more for each wake-up during a call while n stays
// current, and reports whether a wake-up that came during the last call is
// still owed to a callback that replaced n. ns.mu is held on entry and on
// return, not during calls.
func (ns *notifiers) run(n *notifier) (owed bool) {
	n.calling = true
	ns.running++
	for {
		n.again = false
		ns.mu.Unlock()
		C.prosodyInt_call_notify(n.fn, n.ud)
		ns.mu.Lock()
		if !n.again {
			break
		}
		if ns.current != n {
			owed = true
			break
		}
	}
	n.calling, n.again = false, false
	ns.running--
	ns.idle.Broadcast()
	return owed
}
