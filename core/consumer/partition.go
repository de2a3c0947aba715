package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/filter"
	"github.com/prosody-events/prosody-go/core/keyqueue"
	"github.com/prosody-events/prosody-go/core/offsets"
)

// item is one event in a key's queue. Messages carry their offset; timers
// (which have none) carry offsets.None.
type item struct {
	ev     event.Event
	offset int64
}

// partition is the state of one assigned partition: which offsets are
// unfinished, the per-key queue, and the goroutines running its events.
//
// Records enter through admit on the claim's goroutine; events run on one
// goroutine per busy key, which moves on to the key's next event itself, so
// an idle key costs nothing and a busy key no extra goroutine.
type partition struct {
	c     *Consumer
	topic string
	id    int32
	log   *slog.Logger

	// scope is the parent of every invocation's context. It is cancelled
	// near the end of the shutdown budget when the partition is revoked or
	// the consumer stops, so handlers see ShouldCancel.
	scope *event.Context

	queue *keyqueue.Queue[item]
	room  chan struct{} // signalled when the tracker stops being full

	mu          sync.Mutex
	tracker     *offsets.Tracker
	running     int           // goroutines running events
	draining    bool          // set once; nothing new starts after it
	idle        chan struct{} // closed when draining and running == 0
	marked      int64         // last offset handed to sarama to commit
	stallLogged bool
}

func newPartition(c *Consumer, topic string, id int32) *partition {
	return &partition{
		c:       c,
		topic:   topic,
		id:      id,
		log:     c.log.With(slog.String("topic", topic), slog.Int("partition", int(id))),
		scope:   event.NewScope(),
		queue:   keyqueue.New[item](),
		room:    make(chan struct{}, 1),
		tracker: offsets.New(c.opts.MaxUncommitted),
		idle:    make(chan struct{}),
		marked:  offsets.None,
	}
}

// admit takes one record into the partition. It returns false, keeping
// nothing, when max_uncommitted offsets are already unfinished: the caller
// holds the record and offers it again after a signal on room.
func (p *partition) admit(r *sarama.ConsumerMessage) bool {
	now := time.Now()
	p.mu.Lock()
	if r.Offset <= p.tracker.Highest() {
		p.mu.Unlock()
		// A rewind after a seek or a redelivered fetch: the offset was taken
		// before and is tracked there.
		p.log.Debug("message filtered", slog.String("reason", filter.ReasonStale.String()), slog.Int64("offset", r.Offset))
		return true
	}
	if p.tracker.Full() {
		p.mu.Unlock()
		return false
	}
	if err := p.tracker.Take(r.Offset, now); err != nil {
		p.mu.Unlock()
		p.log.Error("offset tracking failed; record left for the next owner", slog.Int64("offset", r.Offset), slog.Any("error", err))
		return true
	}
	p.mu.Unlock()

	msg, reason, err := decode(r, now)
	if err != nil {
		p.c.stats.undecodable.Add(1)
		p.log.Error("undecodable record skipped", slog.Int64("offset", r.Offset),
			slog.String("reason", reason.String()), slog.Any("error", err))
		p.finish(r.Offset)
		return true
	}
	if filter.IsLoop(msg.SourceSystem, msg.SourceSystem != "", p.c.opts.GroupID) {
		p.skip(msg, filter.ReasonSourceSystemLoop)
		return true
	}
	if !p.c.eventTypes.Allowed(msg.Type, msg.HasType) {
		p.skip(msg, filter.ReasonEventType)
		return true
	}
	p.enqueue(item{ev: msg, offset: r.Offset})
	return true
}

func (p *partition) skip(msg *event.Message, reason filter.Reason) {
	p.c.stats.filtered.Add(1)
	p.log.Debug("message filtered", slog.String("reason", reason.String()),
		slog.Int64("offset", msg.Offset), slog.String("key", msg.Key))
	p.finish(msg.Offset)
}

// enqueue puts an event behind its key's earlier events, starting it at once
// when the key is idle.
func (p *partition) enqueue(it item) {
	if !p.queue.Push(it.ev.EventKey(), it) {
		return
	}
	p.mu.Lock()
	if p.draining {
		p.mu.Unlock()
		return
	}
	p.running++
	p.mu.Unlock()
	p.c.exec.submit(task{p: p, it: it})
}

// run handles it and then each further event of the same key, until the
// key's queue is empty or the partition is draining.
func (p *partition) run(it item) {
	for {
		err := p.invoke(it)
		p.complete(it, err)
		next, ok := p.queue.Done(it.ev.EventKey())
		if !ok {
			break
		}
		it = next
	}
	p.mu.Lock()
	p.running--
	if p.draining && p.running == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
}

func (p *partition) invoke(it item) (err error) {
	ctx := event.NewContext(p.scope, it.ev.EventKey())
	defer ctx.Invalidate()
	defer func() {
		// A panicking handler must not take the process down with it, nor
		// leave its key blocked: it counts as a transient failure.
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return p.c.invoke(ctx, it.ev)
}

// complete decides what an outcome means for the event's offset: finished
// (committed) unless the partition is going away or the failure is
// terminal, in which case it stays unfinished and the next owner of the
// partition handles the event again.
func (p *partition) complete(it item, err error) {
	if err == nil {
		p.finishItem(it)
		return
	}
	attrs := []slog.Attr{slog.Int64("offset", it.offset), slog.String("key", it.ev.EventKey()), slog.String("error", err.Error())}
	switch {
	case p.scope.Err() != nil:
		p.log.LogAttrs(context.Background(), slog.LevelWarn, "event aborted: partition is shutting down; the next owner handles it again", attrs...)
	case fault.IsTerminal(err):
		// Better (c): say loudly that this offset now blocks the partition.
		p.log.LogAttrs(context.Background(), slog.LevelError, "event aborted by a terminal failure; its offset stays uncommitted", attrs...)
	default:
		p.c.stats.failed.Add(1)
		p.log.LogAttrs(context.Background(), slog.LevelError, "event failed and is skipped", append(attrs, slog.String("class", fault.ClassOf(err).String()))...)
		p.finishItem(it)
	}
}

func (p *partition) finishItem(it item) {
	if it.offset != offsets.None {
		p.c.stats.handled.Add(1)
		p.finish(it.offset)
	}
}

// finish marks an offset done and wakes the claim loop if that made room.
func (p *partition) finish(offset int64) {
	p.mu.Lock()
	wasFull := p.tracker.Full()
	_, err := p.tracker.Finish(offset)
	p.mu.Unlock()
	if err != nil {
		p.log.Error("offset bookkeeping error", slog.Int64("offset", offset), slog.Any("error", err))
	}
	if wasFull {
		select {
		case p.room <- struct{}{}:
		default:
		}
	}
}

// commitOffset is the offset to commit if it moved since the last call.
func (p *partition) commitOffset() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.tracker.Commit()
	if c == offsets.None || c <= p.marked {
		return 0, false
	}
	p.marked = c
	return c, true
}

// stalled reports whether the oldest unfinished offset has waited longer
// than the stall threshold, logging each change once with the offset.
func (p *partition) stalled(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldest, takenAt, ok := p.tracker.Oldest()
	stalled := ok && now.Sub(takenAt) > p.c.opts.StallThreshold
	if stalled && !p.stallLogged {
		p.log.Error("partition stalled", slog.Int64("oldest_uncommitted_offset", oldest),
			slog.Duration("waiting", now.Sub(takenAt)))
	} else if !stalled && p.stallLogged {
		p.log.Info("partition no longer stalled")
	}
	p.stallLogged = stalled
	return stalled
}

// outstanding is the number of unfinished offsets.
func (p *partition) outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracker.Outstanding()
}

// drain stops the partition: nothing new or queued starts; events in flight
// may finish within budget. Near the end of the budget (4/5) their contexts
// are cancelled with cause; at the end the partition stops waiting and
// leaves what is still running uncommitted.
func (p *partition) drain(budget time.Duration, cause error) {
	dropped := p.queue.Close()
	p.mu.Lock()
	p.draining = true
	if p.running == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
	if len(dropped) > 0 {
		p.log.Info("queued events left for the next owner", slog.Int("count", len(dropped)))
	}
	cancelAt := time.NewTimer(budget * 4 / 5)
	defer cancelAt.Stop()
	deadline := time.NewTimer(budget)
	defer deadline.Stop()
	for {
		select {
		case <-p.idle:
			p.scope.Cancel(cause)
			return
		case <-cancelAt.C:
			p.log.Warn("shutdown budget nearly spent; cancelling running handlers")
			p.scope.Cancel(cause)
		case <-deadline.C:
			p.scope.Cancel(cause)
			p.log.Error("handlers still running at the end of the shutdown budget; their events stay uncommitted")
			return
		}
	}
}
