package consumer

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
)

// orderObserver checks, while handlers run, that each key is handled in
// increasing seq order and never by two handlers at once, and records the
// peak number of handlers running across keys.
type orderObserver struct {
	t       *testing.T
	mu      sync.Mutex
	running map[string]bool
	lastSeq map[string]int
	seen    map[string]bool // key/seq handled at least once
	now     int
	peak    int
}

func newOrderObserver(t *testing.T) *orderObserver {
	return &orderObserver{t: t, running: map[string]bool{}, lastSeq: map[string]int{}, seen: map[string]bool{}}
}

func (o *orderObserver) begin(key string, seq int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running[key] {
		o.t.Errorf("key %s: two handlers at once", key)
	}
	if seq <= o.lastSeq[key] {
		o.t.Errorf("key %s: seq %d handled after %d", key, seq, o.lastSeq[key])
	}
	o.running[key] = true
	o.lastSeq[key] = seq
	o.now++
	if o.now > o.peak {
		o.peak = o.now
	}
}

func (o *orderObserver) end(key string, seq int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running[key] = false
	o.seen[fmt.Sprintf("%s/%d", key, seq)] = true
	o.now--
}

func (o *orderObserver) handled() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

// TestPerKeyOrderUnderConcurrency is the engine's central guarantee: 20,000
// messages over 8 partitions and 2,000 keys, handlers with random delays.
// Each key is handled in offset order, one handler at a time; different
// keys run concurrently; never more than max_concurrency handlers run; no
// partition holds more than max_uncommitted unfinished offsets.
//
// Both handler styles run: a synchronous Go handler, and an asynchronous
// one (as behind the C ABI) that finishes each message on another
// goroutine, where the engine holds no goroutine per message in flight.
func TestPerKeyOrderUnderConcurrency(t *testing.T) {
	eachTargetAndStyle(t, testPerKeyOrder)
}

func testPerKeyOrder(t *testing.T, tg target, async bool) {
	const (
		messages       = 20000
		keys           = 2000
		partitions     = 8
		maxConcurrency = 16
		maxUncommitted = 32
	)
	topic := createTopic(t, tg, partitions)
	records := make([]record, messages)
	seq := map[string]int{}
	for i := range records {
		k := fmt.Sprintf("key-%d", i%keys)
		seq[k]++
		records[i] = record{key: k, value: jsonValue(k, seq[k])}
	}
	produce(t, tg, topic, records)

	obs := newOrderObserver(t)
	rng := rand.New(rand.NewSource(7))
	var rngMu sync.Mutex
	handler := event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
		var body struct{ Seq int }
		if err := json.Unmarshal(m.Payload, &body); err != nil {
			t.Errorf("payload: %v", err)
		}
		obs.begin(m.Key, body.Seq)
		time.Sleep(randomDelay(rng, &rngMu, 300*time.Microsecond))
		obs.end(m.Key, body.Seq)
		return nil
	}}
	opts := baseOptions(tg, topic)
	opts.MaxUncommitted = maxUncommitted
	c := startStyled(t, opts, handler, maxConcurrency, async)
	// Sample every partition's unfinished offsets while it runs.
	peakOutstanding, stopSampling := sampleOutstanding(c)
	waitFor(t, 2*time.Minute, "all messages handled", func() bool { return obs.handled() == messages })
	stopSampling()
	stopConsumer(t, c)

	if obs.peak > maxConcurrency {
		t.Errorf("peak handlers in flight %d > max_concurrency %d", obs.peak, maxConcurrency)
	}
	if obs.peak < 2 {
		t.Errorf("handlers for different keys never overlapped (peak %d)", obs.peak)
	}
	if p := peakOutstanding(); p > maxUncommitted {
		t.Errorf("a partition held %d unfinished offsets > max_uncommitted %d", p, maxUncommitted)
	}
	if c.Stats().Pauses() == 0 {
		t.Errorf("backpressure was never exercised: no partition paused")
	}
	t.Logf("peak concurrency %d, peak unfinished per partition %d, pauses %d", obs.peak, peakOutstanding(), c.Stats().Pauses())
}

// sampleOutstanding records the highest unfinished-offset count seen in any
// partition until the returned stop function is called.
func sampleOutstanding(c *Consumer) (peak func() int, stop func()) {
	var (
		mu   sync.Mutex
		max  int
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			c.mu.Lock()
			for _, p := range c.partitions {
				if n := p.outstanding(); n > max {
					mu.Lock()
					max = n
					mu.Unlock()
				}
			}
			c.mu.Unlock()
		}
	}()
	return func() int { mu.Lock(); defer mu.Unlock(); return max }, func() { close(done); wg.Wait() }
}
