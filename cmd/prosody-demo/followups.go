package main

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// followUps tracks the follow-up timer each key schedules after its last
// event, and reports when every one has fired.
type followUps struct {
	want int
	done chan struct{}

	mu        sync.Mutex
	due       map[string]time.Time // key -> when it was asked for
	firedAt   map[string]time.Time
	early     []string
	scheduleN int
}

func newFollowUps(keys int) *followUps {
	return &followUps{want: keys, done: make(chan struct{}), due: map[string]time.Time{}, firedAt: map[string]time.Time{}}
}

func (f *followUps) scheduled(key string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.due[key] = at
	f.scheduleN++
}

// fired records a timer. Timers keep whole seconds, so one may fire up to
// half a second before the instant asked for, never earlier.
func (f *followUps) fired(key string) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, again := f.firedAt[key]; again {
		return
	}
	f.firedAt[key] = now
	if asked, ok := f.due[key]; ok && now.Before(asked.Add(-500*time.Millisecond)) {
		f.early = append(f.early, fmt.Sprintf("%s fired at %s, asked for %s", key, now.Format(time.TimeOnly), asked.Format(time.TimeOnly)))
	}
	if len(f.firedAt) == f.want {
		close(f.done)
	}
}

func (f *followUps) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	var lateMax time.Duration
	for key, at := range f.firedAt {
		if d := at.Sub(f.due[key]); d > lateMax {
			lateMax = d
		}
	}
	status := "OK"
	if len(f.firedAt) < f.want || len(f.early) > 0 {
		status = "FAILED"
	}
	fmt.Fprintf(&b, "  timers       %s, %d follow-ups scheduled (one per key, 1 s ahead), %d fired, latest %s after the time asked\n",
		status, f.scheduleN, len(f.firedAt), lateMax.Round(time.Millisecond))
	for _, e := range capped(f.early) {
		fmt.Fprintf(&b, "    %s\n", e)
	}
	return b.String()
}

func (f *followUps) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.want - len(f.firedAt); n > 0 {
		return fmt.Errorf("%d follow-up timers did not fire", n)
	}
	if len(f.early) > 0 {
		return fmt.Errorf("%d follow-up timers fired early", len(f.early))
	}
	return nil
}
