package consumer

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/filter"
)

// newTestPartition is a partition of a consumer that is not connected to
// any cluster: records go in through admit, events run through invoke.
func newTestPartition(maxUncommitted int, invoke func(*event.Context, event.Event) error) (*Consumer, *partition) {
	c := &Consumer{
		opts:       Options{GroupID: "g", MaxUncommitted: maxUncommitted},
		invoke:     invoke,
		log:        testLogger(),
		eventTypes: filter.NewEventTypes(nil),
		exec:       newExecutor(),
		rescue:     newRescuer(),
		slowRun:    slowRun,
	}
	return c, newPartition(c, "t", 0)
}

// closeTestConsumer stops what newTestPartition started.
func closeTestConsumer(c *Consumer) {
	c.rescue.close()
	c.exec.close()
}

// testIntake drives p's intake from a channel the test feeds, the way a
// claim would. Closing the channel ends the claim; in.done closes once the
// driver has seen it.
func testIntake(p *partition) (chan<- *sarama.ConsumerMessage, *intake) {
	records := make(chan *sarama.ConsumerMessage, 256)
	in := newIntake(records, time.Hour, p.c.holdLimit(), func(int64) {}, func() {}, func() {})
	p.startIntake(in)
	return records, in
}

// feed sends rs to the intake.
func feed(records chan<- *sarama.ConsumerMessage, rs []*sarama.ConsumerMessage) {
	for _, r := range rs {
		records <- r
	}
}

func testRecord(offset int64, key string) *sarama.ConsumerMessage {
	return &sarama.ConsumerMessage{Topic: "t", Offset: offset, Key: []byte(key), Value: []byte(`{"id":"x"}`)}
}

// TestBlockedHandlersDoNotStallOtherKeys: with every worker the executor
// starts eagerly blocked in a handler, an event of another key still runs.
func TestBlockedHandlersDoNotStallOtherKeys(t *testing.T) {
	release := make(chan struct{})
	ran := make(chan struct{})
	var blocked atomic.Int32
	c, p := newTestPartition(1000, func(ctx *event.Context, ev event.Event) error {
		if strings.HasPrefix(ctx.Key(), "block") {
			blocked.Add(1)
			<-release
			return nil
		}
		close(ran)
		return nil
	})
	n := 4*runtime.GOMAXPROCS(0) + 4
	var rs []*sarama.ConsumerMessage
	for i := 0; i < n; i++ {
		rs = append(rs, testRecord(int64(i), fmt.Sprintf("block-%d", i)))
	}
	rs = append(rs, testRecord(int64(n), "free"))
	records, in := testIntake(p)
	feed(records, rs)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatalf("an idle key waited behind %d blocked handlers", blocked.Load())
	}
	close(release)
	close(records)
	<-in.done
	p.drain(5*time.Second, event.ErrRevoked)
	if o := p.outstanding(); o != 0 {
		t.Fatalf("%d offsets unfinished after every handler returned", o)
	}
	if off, ok := p.commitOffset(); !ok || off != int64(n+1) {
		t.Fatalf("commit offset %d (%v), want %d", off, ok, n+1)
	}
	closeTestConsumer(c)
}

// TestDrainDropsQueuedRuns: runs still queued in the executor when a
// partition drains never start, and their offsets stay unfinished.
func TestDrainDropsQueuedRuns(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	c, p := newTestPartition(1000, func(ctx *event.Context, ev event.Event) error {
		started.Add(1)
		<-release
		return nil
	})
	const n = 200
	var rs []*sarama.ConsumerMessage
	for i := 0; i < n; i++ {
		rs = append(rs, testRecord(int64(i), fmt.Sprintf("k-%d", i)))
	}
	records, in := testIntake(p)
	feed(records, rs)
	time.Sleep(20 * time.Millisecond)
	close(records)
	done := make(chan struct{})
	go func() {
		<-in.done
		p.drain(5*time.Second, event.ErrRevoked)
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	atStop := started.Load()
	close(release)
	<-done
	if s := started.Load(); s != atStop || s >= n {
		t.Fatalf("%d handlers started, %d when draining began (of %d)", s, atStop, n)
	}
	if o := p.outstanding(); o != n-int(atStop) {
		t.Fatalf("%d offsets unfinished, want %d", o, n-int(atStop))
	}
	closeTestConsumer(c)
}

func TestBacklogKeepsOrderAcrossCompaction(t *testing.T) {
	var b backlog
	next, want := int64(0), int64(0)
	for round := 0; round < 200; round++ {
		var rs []*sarama.ConsumerMessage
		for i := 0; i < round%37+1; i++ {
			rs = append(rs, &sarama.ConsumerMessage{Offset: next})
			next++
		}
		b.push(rs)
		n := min(b.len(), round%29+1)
		for _, r := range b.records()[:n] {
			if r.Offset != want {
				t.Fatalf("got offset %d, want %d", r.Offset, want)
			}
			want++
		}
		b.drop(n)
	}
	for _, r := range b.records() {
		if r.Offset != want {
			t.Fatalf("got offset %d, want %d", r.Offset, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("read %d records, pushed %d", want, next)
	}
}

func TestHoldMarksFollowThroughput(t *testing.T) {
	var r holdRate
	start := time.Now()
	if high, low := r.marks(start, 512, 100*time.Millisecond); high != 512 || low != 256 {
		t.Fatalf("before any rate: marks %d/%d, want 512/256", high, low)
	}
	r.admitted = 100 // 1,000/s: slow, the fixed marks hold
	if high, low := r.marks(start.Add(100*time.Millisecond), 512, 100*time.Millisecond); high != 512 || low != 256 {
		t.Fatalf("slow partition: marks %d/%d, want 512/256", high, low)
	}
	for i := 2; i < 12; i++ { // 200,000/s: a poll interval holds 20,000
		r.admitted = 20000
		r.marks(start.Add(time.Duration(i)*100*time.Millisecond), 512, 100*time.Millisecond)
	}
	high, low := r.marks(start.Add(1200*time.Millisecond), 512, 100*time.Millisecond)
	if low < 5000 || low > 20000 || high != 2*low {
		t.Fatalf("fast partition: marks %d/%d", high, low)
	}
}
