package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// replayObserver checks ordering when a rebalance may replay work: per key,
// each handled seq is at most one past the last handled seq. Equal or lower
// means the new owner replays the key's suffix from the committed offset;
// more than one past would mean a message of the key was skipped.
type replayObserver struct {
	t        *testing.T
	mu       sync.Mutex
	running  map[string]bool
	last     map[string]int
	seen     map[string]bool
	replays  int
	handled  int
	maxRerun int
}

func newReplayObserver(t *testing.T) *replayObserver {
	return &replayObserver{t: t, running: map[string]bool{}, last: map[string]int{}, seen: map[string]bool{}}
}

func (o *replayObserver) begin(key string, seq int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running[key] {
		o.t.Errorf("key %s: two handlers at once (across the group)", key)
	}
	o.running[key] = true
	switch last := o.last[key]; {
	case seq == last+1:
	case seq <= last:
		o.replays++
	default:
		o.t.Errorf("key %s: seq %d handled right after %d: a message was skipped", key, seq, last)
	}
	o.last[key] = seq
}

func (o *replayObserver) end(key string, seq int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running[key] = false
	o.handled++
	o.seen[fmt.Sprintf("%s/%d", key, seq)] = true
}

func (o *replayObserver) distinct() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

// TestRebalanceLosesNothing: while 50,000 messages are produced, a second
// and a third member join the group and then leave. Every message is
// handled, per-key order holds, a key never runs on two members at once,
// and duplicates appear only as replays of a key's suffix.
func TestRebalanceLosesNothing(t *testing.T) {
	eachTargetAndStyle(t, testRebalanceLosesNothing)
}

func testRebalanceLosesNothing(t *testing.T, tg target, async bool) {
	const (
		messages   = 50000
		keys       = 500
		partitions = 8
	)
	topic := createTopic(t, tg, partitions)
	obs := newReplayObserver(t)
	handler := event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
		var body struct{ Seq int }
		if err := json.Unmarshal(m.Payload, &body); err != nil {
			t.Errorf("payload: %v", err)
		}
		obs.begin(m.Key, body.Seq)
		time.Sleep(20 * time.Microsecond)
		obs.end(m.Key, body.Seq)
		return nil
	}}
	opts := baseOptions(tg, topic)
	start := func() *Consumer { return startStyled(t, opts, handler, 16, async) }

	// Produce in ten slices spread over the membership changes.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		seq := map[string]int{}
		for slice := 0; slice < 10; slice++ {
			batch := make([]record, messages/10)
			for i := range batch {
				k := fmt.Sprintf("key-%d", (slice*len(batch)+i)%keys)
				seq[k]++
				batch[i] = record{key: k, value: jsonValue(k, seq[k])}
			}
			produce(t, tg, topic, batch)
			time.Sleep(700 * time.Millisecond)
		}
	}()

	first := start()
	waitFor(t, time.Minute, "first member assigned", func() bool { return first.AssignedPartitions() == partitions })
	second := start()
	waitFor(t, time.Minute, "second member assigned", func() bool { return second.AssignedPartitions() > 0 })
	third := start()
	waitFor(t, time.Minute, "third member assigned", func() bool { return third.AssignedPartitions() > 0 })
	time.Sleep(time.Second)
	stopConsumer(t, second)
	time.Sleep(time.Second)
	stopConsumer(t, third)
	waitFor(t, time.Minute, "first member owns everything again", func() bool { return first.AssignedPartitions() == partitions })
	<-produced
	waitFor(t, 2*time.Minute, "all messages handled", func() bool { return obs.distinct() == messages })
	stopConsumer(t, first)

	obs.mu.Lock()
	defer obs.mu.Unlock()
	t.Logf("handled %d times for %d messages (%d replays)", obs.handled, messages, obs.replays)
}

// TestUnsubscribeCommitsAndResumes: a consumer stopped mid-stream commits
// its watermark, and a new member of the same group continues from there
// without losing anything.
func TestUnsubscribeCommitsAndResumes(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			const messages = 4000
			topic := createTopic(t, tg, 4)
			records := make([]record, messages)
			seq := map[string]int{}
			for i := range records {
				k := fmt.Sprintf("key-%d", i%100)
				seq[k]++
				records[i] = record{key: k, value: jsonValue(k, seq[k])}
			}
			produce(t, tg, topic, records)
			obs := newReplayObserver(t)
			handler := event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
				var body struct{ Seq int }
				_ = json.Unmarshal(m.Payload, &body)
				obs.begin(m.Key, body.Seq)
				time.Sleep(100 * time.Microsecond)
				obs.end(m.Key, body.Seq)
				return nil
			}}
			opts := baseOptions(tg, topic)
			c, err := Start(withStacks(opts, handler, middleware.NewFIFOScheduler(8)))
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, time.Minute, "some progress", func() bool { return obs.distinct() > messages/4 })
			stopConsumer(t, c)
			firstRun := c.Stats().Handled()

			c2, err := Start(withStacks(opts, handler, middleware.NewFIFOScheduler(8)))
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, time.Minute, "all messages handled", func() bool { return obs.distinct() == messages })
			stopConsumer(t, c2)
			obs.mu.Lock()
			defer obs.mu.Unlock()
			// The final watermark is committed at stop, so the second member
			// replays at most what was in flight (bounded by max_uncommitted
			// per partition), not everything the first member did.
			if replays := obs.handled - messages; replays > 4*opts.MaxUncommitted {
				t.Errorf("%d messages handled twice after a clean stop; the final watermark was not committed", replays)
			}
			t.Logf("first run handled %d, replays %d", firstRun, obs.handled-messages)
			_ = context.Background()
		})
	}
}
