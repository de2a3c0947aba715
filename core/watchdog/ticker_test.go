package watchdog

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The ticker sleeps once its scan finds nothing, and work published with
// Wake is always scanned again, however the publication races with the
// ticker going to sleep.
func TestTickerSleepsAndWakes(t *testing.T) {
	tk := NewTicker(time.Millisecond)
	var work, ticks, rescans atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk.Run(stop, func(tick bool) bool {
			if tick {
				ticks.Add(1)
			} else {
				rescans.Add(1)
			}
			// One unit of work is done per scan.
			for {
				n := work.Load()
				if n == 0 {
					return false
				}
				if work.CompareAndSwap(n, n-1) {
					return true
				}
			}
		})
	}()
	for round := 0; round < 200; round++ {
		work.Add(1)
		tk.Wake()
		deadline := time.Now().Add(5 * time.Second)
		for work.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: work published with Wake was never scanned", round)
			}
			time.Sleep(50 * time.Microsecond)
		}
		if round%20 == 0 {
			time.Sleep(5 * time.Millisecond) // long enough to fall asleep
		}
	}
	// Asleep now: no more ticks.
	time.Sleep(10 * time.Millisecond)
	before := ticks.Load()
	time.Sleep(20 * time.Millisecond)
	if after := ticks.Load(); after != before {
		t.Fatalf("%d ticks while there was nothing to watch", after-before)
	}
	if rescans.Load() == 0 {
		t.Fatal("never rescanned before sleeping")
	}
	close(stop)
	wg.Wait()
}
