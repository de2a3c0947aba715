package probe

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestHeartbeat(t *testing.T) {
	clock := newClock()
	h := NewHeartbeat("loop", 10*time.Second, clock.Now)
	steps := []struct {
		advance time.Duration
		beat    bool
		stalled bool
	}{
		{0, false, false},                // creation counts as a beat
		{10 * time.Second, false, false}, // exactly the threshold is not a stall
		{time.Nanosecond, false, true},   // strictly more is
		{time.Hour, false, true},
		{0, true, false}, // a beat clears it at once
		{9 * time.Second, false, false},
		{2 * time.Second, false, true},
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		if st.beat {
			h.Beat()
		}
		if got := h.Stalled(); got != st.stalled {
			t.Fatalf("step %d: Stalled() = %v, want %v (since beat %v)", i, got, st.stalled, h.SinceBeat())
		}
	}
	if h.Name() != "loop" || h.Interval() != 2*time.Second {
		t.Errorf("Name() = %q, Interval() = %v", h.Name(), h.Interval())
	}
}

func TestHeartbeatRealClock(t *testing.T) {
	h := NewHeartbeat("real", time.Hour, nil)
	h.Beat()
	if h.Stalled() {
		t.Fatal("fresh heartbeat with a real clock is stalled")
	}
}

func TestRegistry(t *testing.T) {
	clock := newClock()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	r := NewRegistry("orders", 10*time.Second, clock.Now, logger)

	poll := r.Register("Kafka poll loop")
	tracker := r.Register("failure tracker")
	if poll.Name() != "orders Kafka poll loop" {
		t.Fatalf("Name() = %q, want the group prefix", poll.Name())
	}

	check := func(step string, want ...string) {
		t.Helper()
		stalled, names := r.Stalled()
		if stalled != (len(want) > 0) || !slices.Equal(names, want) {
			t.Fatalf("%s: Stalled() = %v %q, want %q", step, stalled, names, want)
		}
	}
	count := func(msg string) int { return strings.Count(logs.String(), `msg="`+msg+`"`) }

	check("fresh")
	clock.Advance(11 * time.Second)
	poll.Beat()
	check("tracker stalls", "orders failure tracker")
	check("still stalled", "orders failure tracker")
	if n := count("heartbeat stalled"); n != 1 {
		t.Fatalf("stall logged %d times, want once:\n%s", n, &logs)
	}
	if !strings.Contains(logs.String(), `heartbeat="orders failure tracker"`) {
		t.Errorf("stall log does not name the heartbeat:\n%s", &logs)
	}

	clock.Advance(11 * time.Second)
	check("both stalled (sorted)", "orders Kafka poll loop", "orders failure tracker")
	tracker.Beat()
	poll.Beat()
	check("recovered")
	check("still recovered")
	if n := count("heartbeat no longer stalled"); n != 2 {
		t.Fatalf("recovery logged %d times, want twice:\n%s", n, &logs)
	}

	clock.Advance(11 * time.Second)
	r.Unregister("Kafka poll loop")
	check("unregistered not reported", "orders failure tracker")
	r.Unregister("missing") // no-op

	fresh := r.Register("failure tracker")
	check("re-register replaces")
	if fresh == tracker {
		t.Error("Register returned the old heartbeat")
	}
}

func TestRegistryConcurrentLogsOnce(t *testing.T) {
	clock := newClock()
	var mu sync.Mutex
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	r := NewRegistry("", time.Second, clock.Now, logger)
	h := r.Register("event processor")
	if h.Name() != "event processor" {
		t.Fatalf("Name() = %q without prefix", h.Name())
	}
	clock.Advance(2 * time.Second)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				r.Stalled()
				h.Stalled()
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "heartbeat stalled"); n != 1 {
		t.Errorf("stall logged %d times, want once", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
