package timerwake

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The waker follows busy: it asks again and again while handlers run,
// keeps asking (at its idle pace) while none do, and stops when asked,
// busy or idle, leaving no goroutine behind.
func TestWakerFollowsBusy(t *testing.T) {
	for _, stopBusy := range []bool{true, false} {
		var busy atomic.Bool
		var asked atomic.Int64
		busy.Store(true)
		w := Start(50*time.Microsecond, func() bool { asked.Add(1); return busy.Load() })
		if n := Running(); n != 1 {
			t.Fatalf("%d wakers run, want 1", n)
		}
		testservices.WaitFor(t, 30*time.Second, "the waker asks while busy", func() bool { return asked.Load() >= 100 })
		busy.Store(false)
		n := asked.Load()
		testservices.WaitFor(t, 30*time.Second, "the waker keeps asking while idle", func() bool { return asked.Load() >= n+2 })
		busy.Store(stopBusy)
		w.Stop() // returns once the goroutine has ended (goleak checks)
		w.Stop() // again: a no-op
		if n := Running(); n != 0 {
			t.Fatalf("stopped: %d wakers run, want 0", n)
		}
	}
}

// A zero period runs, at MinPeriod.
func TestStartZeroPeriod(t *testing.T) {
	var asked atomic.Int64
	w := Start(0, func() bool { asked.Add(1); return true })
	testservices.WaitFor(t, 30*time.Second, "the waker runs with a zero period", func() bool { return asked.Load() >= 10 })
	w.Stop()
}
