package consumer

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/filter"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// newTestPartition is a partition of a consumer that is not connected to
// any cluster: records go in through admit, events run through invoke.
func newTestPartition(maxUncommitted int, invoke func(*event.Context, event.Event) error) (*Consumer, *partition) {
	return newStackPartition(maxUncommitted, middleware.NewStack(middleware.Func(invoke)))
}

// newStackPartition is newTestPartition with events running through stack.
func newStackPartition(maxUncommitted int, stack *middleware.Stack) (*Consumer, *partition) {
	c := &Consumer{
		opts:       Options{GroupID: "g", MaxUncommitted: maxUncommitted, Stacks: middleware.Stacks{Events: stack}},
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

// testIntake drives p's intake from a channel the test feeds, the way the
// fetcher and a claim would: each record sent reaches the partition's
// stream, and closing the channel ends the claim once they all have.
// in.done closes once the driver has seen the end.
func testIntake(p *partition) (chan<- fetch.Record, *intake) {
	records := make(chan fetch.Record, 256)
	claim := make(chan *sarama.ConsumerMessage)
	stream := fetch.NewStream(p.topic, p.id, 0, p.c.holdLimit())
	in := newIntake(stream, claim, time.Hour, p.c.holdLimit(), func(int64) {})
	go func() {
		defer close(claim)
		// What is sent before the stream takes it arrives as one fetch.
		next := int64(0)
		for r := range records {
			batch := []fetch.Record{r}
		gather:
			for {
				select {
				case r, ok := <-records:
					if !ok {
						break gather
					}
					batch = append(batch, r)
				default:
					break gather
				}
			}
			last := batch[len(batch)-1].Offset + 1
			stream.Push(next, batch, last)
			next = last
		}
	}()
	p.startIntake(in)
	return records, in
}

// feed sends rs to the intake.
func feed(records chan<- fetch.Record, rs []fetch.Record) {
	for _, r := range rs {
		records <- r
	}
}

func testRecord(offset int64, key string) fetch.Record {
	return fetch.Record{Offset: offset, Key: []byte(key), Value: []byte(`{"id":"x"}`)}
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
	var rs []fetch.Record
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
	var rs []fetch.Record
	for i := 0; i < n; i++ {
		rs = append(rs, testRecord(int64(i), fmt.Sprintf("k-%d", i)))
	}
	records, in := testIntake(p)
	feed(records, rs)
	eventually(t, "handlers start", func() bool { return started.Load() > 0 })
	close(records)
	done := make(chan struct{})
	go func() {
		<-in.done
		p.drain(5*time.Second, event.ErrRevoked)
		close(done)
	}()
	// Draining has begun, and every run it left in flight has started its
	// handler (which blocks): what started now is all that may ever start.
	eventually(t, "draining leaves only started runs", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.draining && p.running == int(started.Load())
	})
	atStop := started.Load()
	close(release)
	<-done
	if s := started.Load(); s != atStop || s >= n {
		t.Fatalf("%d handlers started, %d when draining began (of %d)", s, atStop, n)
	}
	// What did not start is left for the next owner: admitted and
	// unfinished, or still in the stream when the claim ended (the driver
	// looks for the claim's end between bursts).
	if o := p.outstanding(); o+in.unread != n-int(atStop) {
		t.Fatalf("%d offsets unfinished and %d records unread, want %d in all", o, in.unread, n-int(atStop))
	}
	closeTestConsumer(c)
}

func TestHoldLimitFollowsThroughput(t *testing.T) {
	var r holdRate
	start := time.Now()
	if got := r.limit(start, 512, 100*time.Millisecond); got != 512 {
		t.Fatalf("before any rate: limit %d, want 512", got)
	}
	r.admitted = 100 // 1,000/s: slow, the fixed limit holds
	if got := r.limit(start.Add(100*time.Millisecond), 512, 100*time.Millisecond); got != 512 {
		t.Fatalf("slow partition: limit %d, want 512", got)
	}
	for i := 2; i < 12; i++ { // 200,000/s: a poll interval holds 20,000
		r.admitted = 20000
		r.limit(start.Add(time.Duration(i)*100*time.Millisecond), 512, 100*time.Millisecond)
	}
	if got := r.limit(start.Add(1200*time.Millisecond), 512, 100*time.Millisecond); got < 10000 || got > 40000 {
		t.Fatalf("fast partition: limit %d, want about 40,000", got)
	}
}

// The engine's one allocation per asynchronous message stays below 512
// bytes: the runtime allocates larger objects with a header, and both that
// and the collector's scan of them cost markedly more (seen in the C ABI's
// and Node's throughput when a middleware run grew past it).
func TestAsyncEventFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(asyncEvent{}); n > 480 {
		t.Fatalf("asyncEvent is %d bytes, want at most 480", n)
	}
}
