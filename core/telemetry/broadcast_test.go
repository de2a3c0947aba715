package telemetry

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type recorder struct {
	mu  sync.Mutex
	got []Event
}

func (r *recorder) Observe(e Event) { r.mu.Lock(); r.got = append(r.got, e); r.mu.Unlock() }

func TestBroadcast(t *testing.T) {
	var b Broadcast
	if b.Active() {
		t.Fatal("a new broadcast has no observers")
	}
	b.Publish(Event{Key: "nobody"}) // must not panic
	r1, r2 := &recorder{}, &recorder{}
	cancel1 := b.Subscribe(r1)
	b.Subscribe(r2)
	b.Publish(Event{Kind: HandlerInvoked, Key: "a"})
	cancel1()
	cancel1() // idempotent
	b.Publish(Event{Kind: HandlerSucceeded, Key: "a"})
	if len(r1.got) != 1 || len(r2.got) != 2 {
		t.Fatalf("r1 got %d, r2 got %d", len(r1.got), len(r2.got))
	}
	if r2.got[1].Kind != HandlerSucceeded || r2.got[1].Key != "a" {
		t.Fatalf("r2 got %+v", r2.got[1])
	}
}

func TestBufferedDropsWhenFull(t *testing.T) {
	var b Broadcast
	q := NewBuffered(2)
	b.Subscribe(q)
	for i := 0; i < 5; i++ {
		b.Publish(Event{Partition: int32(i)})
	}
	if q.Dropped() != 3 {
		t.Fatalf("dropped %d, want 3", q.Dropped())
	}
	if e := <-q.C(); e.Partition != 0 {
		t.Fatalf("first queued event is %d", e.Partition)
	}
}

func TestBroadcastConcurrentSubscribe(t *testing.T) {
	var b Broadcast
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); cancel := b.Subscribe(&recorder{}); cancel() }()
		go func() { defer wg.Done(); b.Publish(Event{}) }()
	}
	wg.Wait()
	if b.Active() {
		t.Fatal("every observer was removed")
	}
}

// A broadcast's clock moves on while it is read, at its tick's resolution,
// and sleeps while it is not; it never runs ahead of the system clock.
func TestBroadcastClock(t *testing.T) {
	b := NewBroadcast()
	defer b.Close()
	first := b.Now()
	if sys := Now(); first > sys {
		t.Fatalf("the broadcast clock (%d) is ahead of the system clock (%d)", first, sys)
	}
	deadline := Now() + int64(10*time.Second)
	for b.Now() < first+int64(5*ClockTick) {
		if Now() > deadline {
			t.Fatal("the broadcast clock does not move")
		}
		time.Sleep(ClockTick)
	}
	for !b.clock.Load().ticker.Asleep() {
		if Now() > deadline {
			t.Fatal("the clock's ticker never sleeps while nobody reads it")
		}
		time.Sleep(ClockTick)
	}
	before := Now()
	if got := b.Now(); got < before {
		t.Fatalf("a read after the ticker slept is stale: %d < %d", got, before)
	}
	b.Close()
	b.Close()
	if got, sys := b.Now(), Now(); got > sys {
		t.Fatal("a closed broadcast reads the system clock")
	}
}
