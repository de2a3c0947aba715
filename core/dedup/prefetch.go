package dedup

import (
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
)

// pendingLifetime is how long a prefetched lookup waits for its message:
// longer means the message never ran here (its partition went away).
const pendingLifetime = time.Minute

// ahead holds the store lookups started when messages were admitted
// (Prefetch) until their message's Check takes them. With a store over
// the network this is what keeps a busy consumer from waiting a round
// trip per message: the lookups of a fetched burst go out together, and
// its messages find their answers there when they run.
type ahead struct {
	mu      sync.Mutex
	m       map[ID]*pending
	sweepAt int64
	// unwritten are the ids recorded whose store write has not landed
	// (Record), with the partition of the message (FlushPartition).
	unwritten map[ID]partition
}

type partition struct {
	topic string
	id    int32
}

func partitionOf(msg *event.Message) partition { return partition{msg.Topic, msg.Partition} }

type pending struct {
	part   partition // of the message that started the lookup (Forget)
	at     int64     // when the lookup started, unix nanoseconds
	done   bool
	found  bool
	err    error
	waiter func(found bool, err error) // Check's, when it came first
}

// Prefetch works out the ids of msgs, admitted to their partition and to
// run, and starts their store lookups, but for ids cached or already
// under way. A store in memory is only touched, every id in a row, so
// that the processor waits for their cache misses together rather than
// one by one; its answers are then quick to get when the messages run.
func (d *Deduplicator) Prefetch(msgs []*event.Message) {
	for _, msg := range msgs {
		d.ID(msg)
	}
	if d.cache == nil {
		for _, msg := range msgs {
			d.immediate.Touch(msg.DedupID)
		}
		return
	}
	for _, msg := range msgs {
		d.prefetch(msg)
	}
}

// prefetch starts the store lookup of msg, unless its id is cached or
// already under way.
func (d *Deduplicator) prefetch(msg *event.Message) {
	id := msg.DedupID
	if d.cache.has(id) {
		return
	}
	now := time.Now().UnixNano()
	a := &d.ahead
	a.mu.Lock()
	_, queued := a.m[id]
	_, unwritten := a.unwritten[id]
	if queued || unwritten {
		a.mu.Unlock()
		return
	}
	p := &pending{part: partitionOf(msg), at: now}
	a.m[id] = p
	if now > a.sweepAt {
		for id, q := range a.m {
			if now-q.at > int64(pendingLifetime) {
				delete(a.m, id)
			}
		}
		a.sweepAt = now + int64(pendingLifetime/4)
	}
	a.mu.Unlock()
	d.store.Exists(id, func(found bool, err error) {
		a.mu.Lock()
		p.done, p.found, p.err = true, found, err
		w := p.waiter
		p.waiter = nil
		a.mu.Unlock()
		if w != nil {
			w(found, err)
		}
	})
}

// Forget drops the prefetched lookups of a partition whose admitted
// messages will not run here any more (its claim ended). Their answers
// go stale once the partition's next owner handles the messages: were
// the partition to come back, a redelivered message would otherwise take
// its old "absent" and run again.
func (d *Deduplicator) Forget(topic string, id int32) {
	part := partition{topic, id}
	a := &d.ahead
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, p := range a.m {
		if p.part == part {
			delete(a.m, id)
		}
	}
}

// lookup answers whether id is recorded: unwritten yet, or in the store
// by its prefetched lookup, if there is one (taking it), else by a lookup
// of its own.
func (d *Deduplicator) lookup(id ID, done func(found bool, err error)) {
	a := &d.ahead
	a.mu.Lock()
	if _, ok := a.unwritten[id]; ok {
		a.mu.Unlock()
		done(true, nil)
		return
	}
	p := a.m[id]
	if p == nil {
		a.mu.Unlock()
		d.store.Exists(id, done)
		return
	}
	delete(a.m, id)
	if p.done {
		a.mu.Unlock()
		done(p.found, p.err)
		return
	}
	p.waiter = done
	a.mu.Unlock()
}
