package middleware

import "time"

// Clock runs the delays of retries. Tests replace the real one with a fake
// that records each delay and fires it on demand.
type Clock interface {
	// AfterFunc calls f on its own goroutine once d has passed, unless
	// stop is called first (stop reports whether it was).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
