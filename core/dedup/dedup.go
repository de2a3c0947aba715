package dedup

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/dedupstore"
	"github.com/prosody-events/prosody-go/core/event"
)

// Options configure a Deduplicator.
type Options struct {
	Version   string // idempotence_version: changing it forgets every id
	Group     string // the consumer group, part of every id
	CacheSize int    // idempotence_cache_size; at least 1
	Store     dedupstore.Store
	Logger    *slog.Logger
}

// Deduplicator answers whether a message was handled before and records
// the ones handled. One serves every partition of a client; its cache
// lives as long as the client, across subscriptions.
type Deduplicator struct {
	version, group string
	cache          *cache // nil in front of a store in memory
	store          dedupstore.Store
	immediate      dedupstore.Immediate // the store, when it answers in the call
	ahead          ahead
	log            *slog.Logger

	skipped, readFailures, writeFailures atomic.Int64
}

// New returns a Deduplicator.
func New(o Options) *Deduplicator {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	d := &Deduplicator{version: o.Version, group: o.Group, store: o.Store, log: log,
		ahead: ahead{m: make(map[ID]*pending), unwritten: make(map[ID]partition)}}
	// A store in memory (mock mode) answers as fast as a cache would, and
	// everything a cache could hold: one there would only cost its upkeep,
	// which for a stream of new ids is an eviction on every add.
	if im, ok := o.Store.(dedupstore.Immediate); ok {
		d.immediate = im
	} else {
		d.cache = newCache(max(o.CacheSize, 1))
	}
	return d
}

// Immediate reports whether Seen and Recorded serve: the store answers in
// the call, and Check and Record need not take callbacks.
func (d *Deduplicator) Immediate() bool { return d.immediate != nil }

// Seen is Check for an Immediate deduplicator: whether msg, whose id is
// id, was handled before (then counted and logged as filtered).
func (d *Deduplicator) Seen(msg *event.Message, id ID) bool {
	if !d.immediate.Found(id) {
		return false
	}
	d.skip(msg)
	return true
}

// Recorded is Record for an Immediate deduplicator.
func (d *Deduplicator) Recorded(id ID) { d.immediate.Put(id) }

// ID is msg's deduplication id, worked out once and kept in msg.
func (d *Deduplicator) ID(msg *event.Message) ID {
	if msg.DedupID == (ID{}) {
		msg.DedupID = MessageID(d.version, d.group, msg)
	}
	return msg.DedupID
}

// Check calls done with whether msg, whose id is id, was handled before:
// its id is in the cache, or else in the store (then it is cached). A
// failed store read is a miss, logged (core-behavior.md §1(e)). A message
// seen before is counted and logged as filtered. done runs exactly once,
// possibly before Check returns.
func (d *Deduplicator) Check(msg *event.Message, id ID, done func(seen bool)) {
	if d.cache != nil && d.cache.has(id) {
		d.skip(msg)
		done(true)
		return
	}
	d.lookup(id, func(found bool, err error) {
		if err != nil {
			d.readFailures.Add(1)
			d.log.Warn("deduplication store read failed; the message is handled as unseen",
				slog.String("topic", msg.Topic), slog.Int("partition", int(msg.Partition)),
				slog.Int64("offset", msg.Offset), slog.Any("error", err))
			done(false)
			return
		}
		if found {
			if d.cache != nil {
				d.cache.add(id)
			}
			d.skip(msg)
		}
		done(found)
	})
}

func (d *Deduplicator) skip(msg *event.Message) {
	d.skipped.Add(1)
	d.log.Debug("message filtered", slog.String("reason", "deduplicated"),
		slog.String("topic", msg.Topic), slog.Int("partition", int(msg.Partition)),
		slog.Int64("offset", msg.Offset), slog.String("key", msg.Key))
}

// maxUnwritten is how many recorded ids may wait for their store write
// before Record waits for its own: the writes of a busy consumer go out
// in batches behind its handlers, and a store that falls behind slows
// the handlers instead of growing the queue.
const maxUnwritten = 16384

// Record marks id as handled and calls done. With a store over the
// network the id is cached and held as unwritten at once, and done runs
// then, while the write goes out behind it (in a batch with others);
// Check answers from the unwritten ids until the write has landed. Only
// when maxUnwritten ids wait does done wait for this one's write. A
// failed store write is logged and changes nothing else: the cache still
// deduplicates within the process (core-behavior.md §1(e)). A crash
// before the write lands may have the message handled again by the next
// owner, as a crash before the handler's outcome would. done runs exactly
// once, possibly before Record returns.
func (d *Deduplicator) Record(msg *event.Message, id ID, done func()) {
	if d.cache == nil {
		d.store.Record(id, func(err error) {
			d.wrote(msg, err)
			done()
		})
		return
	}
	a := &d.ahead
	a.mu.Lock()
	wait := len(a.unwritten) >= maxUnwritten
	a.unwritten[id] = partitionOf(msg)
	delete(a.m, id) // a lookup started before now may say absent
	a.mu.Unlock()
	d.cache.add(id)
	d.store.Record(id, func(err error) {
		d.wrote(msg, err)
		a.mu.Lock()
		delete(a.unwritten, id)
		a.mu.Unlock()
		if wait {
			done()
		}
	})
	if !wait {
		done()
	}
}

func (d *Deduplicator) wrote(msg *event.Message, err error) {
	if err != nil {
		d.writeFailures.Add(1)
		d.log.Warn("deduplication store write failed; the message may be handled again after a restart",
			slog.String("topic", msg.Topic), slog.Int("partition", int(msg.Partition)),
			slog.Int64("offset", msg.Offset), slog.Any("error", err))
	}
}

// Flush waits until every recorded id has been written (or its write has
// failed), or ctx ends.
func (d *Deduplicator) Flush(ctx context.Context) error {
	return d.flush(ctx, func(partition) bool { return true })
}

// FlushPartition waits until the ids recorded for the messages of one
// partition have been written (or their writes have failed), or ctx
// ends. The ids other partitions go on recording do not hold it up.
func (d *Deduplicator) FlushPartition(ctx context.Context, topic string, id int32) error {
	part := partition{topic, id}
	return d.flush(ctx, func(p partition) bool { return p == part })
}

// flush waits until no id of a partition mine picks is unwritten, or ctx
// ends. It counts them every pass: a flush is rare (a partition let go,
// the client stopping) and the unwritten ids few (maxUnwritten at most).
func (d *Deduplicator) flush(ctx context.Context, mine func(partition) bool) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		d.ahead.mu.Lock()
		n := 0
		for _, p := range d.ahead.unwritten {
			if mine(p) {
				n++
			}
		}
		d.ahead.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deduplication: %d ids still being written: %w", n, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// Stats are the Deduplicator's counters.
type Stats struct {
	Skipped       int64 // messages skipped as seen before (filtered, reason deduplicated)
	ReadFailures  int64 // store reads that failed and counted as misses
	WriteFailures int64 // store writes that failed
}

// Stats returns the counters so far.
func (d *Deduplicator) Stats() Stats {
	return Stats{Skipped: d.skipped.Load(), ReadFailures: d.readFailures.Load(), WriteFailures: d.writeFailures.Load()}
}
