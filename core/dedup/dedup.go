package dedup

import (
	"log/slog"
	"sync/atomic"

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
	cache          *cache
	store          dedupstore.Store
	log            *slog.Logger

	skipped, readFailures, writeFailures atomic.Int64
}

// New returns a Deduplicator; Close releases its cache.
func New(o Options) *Deduplicator {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Deduplicator{version: o.Version, group: o.Group, cache: newCache(max(o.CacheSize, 1)), store: o.Store, log: log}
}

// ID is msg's deduplication id.
func (d *Deduplicator) ID(msg *event.Message) ID { return MessageID(d.version, d.group, msg) }

// Local reports whether Check and Record finish before they return.
func (d *Deduplicator) Local() bool { return d.store.Local() }

// Check calls done with whether msg, whose id is id, was handled before:
// its id is in the cache, or else in the store (then it is cached). A
// failed store read is a miss, logged (core-behavior.md §1(e)). A message
// seen before is counted and logged as filtered. done runs exactly once,
// possibly before Check returns.
func (d *Deduplicator) Check(msg *event.Message, id ID, done func(seen bool)) {
	if d.cache.has(id) {
		d.skip(msg)
		done(true)
		return
	}
	d.store.Exists(id, func(found bool, err error) {
		if err != nil {
			d.readFailures.Add(1)
			d.log.Warn("deduplication store read failed; the message is handled as unseen",
				slog.String("topic", msg.Topic), slog.Int("partition", int(msg.Partition)),
				slog.Int64("offset", msg.Offset), slog.Any("error", err))
			done(false)
			return
		}
		if found {
			d.cache.add(id)
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

// Record marks id as handled, in the store and then in the cache, and
// calls done. A failed store write is logged and changes nothing else:
// the cache still deduplicates within the process (core-behavior.md
// §1(e)). done runs exactly once, possibly before Record returns.
func (d *Deduplicator) Record(msg *event.Message, id ID, done func()) {
	d.store.Record(id, func(err error) {
		if err != nil {
			d.writeFailures.Add(1)
			d.log.Warn("deduplication store write failed; the message may be handled again after a restart",
				slog.String("topic", msg.Topic), slog.Int("partition", int(msg.Partition)),
				slog.Int64("offset", msg.Offset), slog.Any("error", err))
		}
		d.cache.add(id)
		done()
	})
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

// Close releases the cache. Check and Record must not be called after.
func (d *Deduplicator) Close() { d.cache.close() }
