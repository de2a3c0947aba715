package fetch

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/dgraph-io/ristretto/v2"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/lfucache"
	"github.com/prosody-events/prosody-go/core/kafkafault"
)

// Loader reads single records back from Kafka by (topic, partition,
// offset): the deferred messages of pipeline mode (core-behavior.md §4.7),
// whose retry timer fired long after the fetch loop moved past them.
//
// Unlike the original, which runs a second consumer (a consumer group
// with manual assignment) and seeks it, a load is a point read: one fetch
// request for the partition at the offset, to the partition's leader.
// Concurrent loads of one partition whose offsets lie within
// DiscardThreshold of the smallest pending one share a fetch that starts
// at that offset (what the response holds beyond the offsets asked for is
// discarded); a load further away gets a fetch of its own. Loads of the
// same offset share one fetch, and loaded records are cached.
//
// In mock mode the loader's client points at the in-process broker
// (core/mockbroker), which holds the records, so deferred messages reload
// there as they do against Kafka (core-behavior.md §1(g)).
type Loader struct {
	client sarama.Client
	opts   LoaderOptions
	log    *slog.Logger
	sem    chan struct{}
	// cache is made by the first record it keeps (nil until then, and
	// always when CacheSize disables it): most consumers never load a
	// record, and a cache for the default size is a third of a MiB and
	// two goroutines. A record kept once Close has begun makes none.
	cache   atomic.Pointer[recordCache]
	cacheMu sync.Mutex // making the cache, or taking it to close

	mu     sync.Mutex
	groups map[partitionKey][]*loadGroup
	closed bool
	// recent are the last reads' records, whole: the keys a partition
	// defers at one time have their queued messages in the same stretch
	// of the log, so one read (a compressed batch must be decoded whole
	// anyway) serves the retries of many keys. A record that retention
	// removed since is still served from them, which loses nothing. next
	// is where a new read goes.
	recent [recentReads]recentRead
	next   int

	done chan struct{}
	wg   sync.WaitGroup

	// fetches counts the fetch requests sent, and beforeFetch, if set
	// before the first Load, runs before each: test hooks.
	fetches     atomic.Int64
	beforeFetch func(topic string, partition int32, offset int64)
}

// recentReads is how many reads' records the loader keeps (see
// Loader.recent): each is at most a fetch's budget of decoded records.
const recentReads = 4

// recentRead is what one read found: the records of key in [from, next).
type recentRead struct {
	key      partitionKey
	from     int64
	next     int64
	records  []Record
	occupied bool
}

// LoaderOptions configure a Loader. Zero values take the defaults, except
// CacheSize and DiscardThreshold, for which zero is a setting.
type LoaderOptions struct {
	// CacheSize is how many loaded records are kept, keyed by (topic,
	// partition, offset), so that a retry of the same deferred message
	// does not fetch again (defer_cache_size, whose default is
	// DefaultLoaderCacheSize). Zero or less disables the cache.
	CacheSize int
	// SeekTimeout bounds one read: finding the partition's leader and
	// fetching from it (defer_seek_timeout; default 30 s). On expiry the
	// loads waiting for that read fail transient (ErrLoadTimeout).
	SeekTimeout time.Duration
	// DiscardThreshold is how far past the smallest offset pending for a
	// partition a load may be and still share its fetch, rather than get
	// one of its own (defer_discard_threshold; default 100 in the
	// configuration). Negative is taken as zero: only loads of the same
	// offset share a fetch.
	DiscardThreshold int
	// MaxInFlight is how many loads run at once (max_uncommitted; default
	// 64); further loads wait for one to end, or for their context.
	MaxInFlight int
	// MaxBytes is the byte budget of a fetch (default 256 KiB: a read
	// decodes what it fetches, and one read's records serve the
	// retries near them, see Loader.recent). A record larger than that is read by
	// doubling the budget up to maxLoadBytes.
	MaxBytes int32
	Logger   *slog.Logger
}

// Defaults of LoaderOptions; DefaultLoaderCacheSize and
// DefaultDiscardThreshold are the configuration's defaults, for callers
// that build options without it.
const (
	DefaultLoaderCacheSize  = 1024
	DefaultDiscardThreshold = 100
	defaultSeekTimeout      = 30 * time.Second
	defaultMaxInFlight      = 64
	defaultLoadBytes        = 256 << 10
	// maxLoadBytes is the largest budget a load doubles to for one record
	// (Kafka's message.max.bytes is about 1 MiB by default; topics may
	// raise it). A record that does not fit fails permanent.
	maxLoadBytes = 64 << 20
	// loadMaxWait is how long the broker may hold a point read: we want
	// only what is there, and wait only when the offset is at or past the
	// log's end.
	loadMaxWait = 10 * time.Millisecond
)

func (o *LoaderOptions) defaults() {
	if o.SeekTimeout <= 0 {
		o.SeekTimeout = defaultSeekTimeout
	}
	o.DiscardThreshold = max(o.DiscardThreshold, 0)
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = defaultMaxInFlight
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultLoadBytes
	}
	o.MaxBytes = min(o.MaxBytes, maxLoadBytes)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

var (
	// ErrOffsetDeleted is wrapped by the error of a load whose record is
	// gone: retention or DeleteRecords moved the log's start past it, or
	// compaction removed it (the first record at or after the offset has
	// a higher one), or the log no longer reaches it (the offset is below
	// the log's start, or past its end after a truncation). It is
	// permanent. An offset within the log but not yet below the high
	// watermark is a transient failure: a new leader's high watermark can
	// trail the old one's.
	ErrOffsetDeleted = fault.Permanent(errors.New("fetch: the record is no longer in the log"))
	// ErrLoaderClosed is returned by loads once Close has started. It is
	// terminal.
	ErrLoaderClosed = fault.Terminal(errors.New("fetch: loader closed"))
	// ErrLoadTimeout is wrapped by the error of a load whose read took
	// longer than SeekTimeout. It is transient.
	ErrLoadTimeout = fault.Transient(errors.New("fetch: load timed out"))
	// ErrRecordTooLarge is wrapped by the error of a load whose record
	// does not fit the largest fetch budget. It is permanent.
	ErrRecordTooLarge = fault.Permanent(errors.New("fetch: record too large to load"))
)

// NewLoader makes a loader that reads through client, and closes it on
// Close.
//
// The client should be the loader's own, not the fetch loop's (Fetcher):
// a broker connection answers its requests in order, one at a time
// (sarama holds the connection for the whole round trip), so a point read
// sent on the fetch loop's connection would wait behind its long-poll
// fetches. No consumer group is created.
func NewLoader(client sarama.Client, opts LoaderOptions) *Loader {
	opts.defaults()
	l := &Loader{client: client, opts: opts, log: opts.Logger, sem: make(chan struct{}, opts.MaxInFlight),
		groups: make(map[partitionKey][]*loadGroup), done: make(chan struct{})}
	return l
}

type partitionKey struct {
	topic     string
	partition int32
}

type recordKey struct {
	partitionKey
	offset int64
}

// loadGroup is the loads of one partition served by one sequence of
// fetches, one at a time; each starts at the smallest offset still
// pending. A load joins a group whose next fetch starts at most
// DiscardThreshold before it, or starts a group of its own.
type loadGroup struct {
	key  partitionKey
	from int64 // where the fetch under way (or the next) starts; under Loader.mu
	reqs []*loadReq
}

type loadReq struct {
	offset int64
	res    chan loadResult // buffered: resolved once, never blocks
}

type loadResult struct {
	rec Record
	err error
}

// Load reads the record at offset of topic/partition. The record's slices
// are its own (copied out of the fetch response) and shared with the
// cache: callers must not modify them.
//
// Errors: ctx's error, wrapped, if ctx ends first (while waiting for a
// permit or for the read); ErrOffsetDeleted (permanent) if the record is
// gone; ErrLoadTimeout (transient) after SeekTimeout; ErrLoaderClosed
// (terminal) once Close has started; a Kafka error classified as
// core-behavior.md §7 says.
func (l *Loader) Load(ctx context.Context, topic string, partition int32, offset int64) (Record, error) {
	rec, _, err := l.LoadCached(ctx, topic, partition, offset)
	return rec, err
}

// LoadCached is Load, and says whether the record came from memory (the
// cache, or the records fetched last) rather than from a read.
func (l *Loader) LoadCached(ctx context.Context, topic string, partition int32, offset int64) (Record, bool, error) {
	if offset < 0 {
		return Record{}, false, fault.Permanent(fmt.Errorf("fetch: loading %s/%d: invalid offset %d", topic, partition, offset))
	}
	select {
	case <-l.done:
		return Record{}, false, ErrLoaderClosed
	default:
	}
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return Record{}, false, fmt.Errorf("fetch: loading %s/%d at %d: waiting for a permit: %w", topic, partition, offset, ctx.Err())
	case <-l.done:
		return Record{}, false, ErrLoaderClosed
	}
	defer func() { <-l.sem }()

	k := recordKey{partitionKey{topic, partition}, offset}
	if rec, ok := l.cached(k); ok {
		return rec, true, nil
	}
	if rec, ok := l.fromRecent(k); ok {
		l.keep(k, rec)
		return rec, true, nil
	}
	req := &loadReq{offset: offset, res: make(chan loadResult, 1)}
	g, err := l.enqueue(k, req)
	if err != nil {
		return Record{}, false, err
	}
	select {
	case r := <-req.res:
		return r.rec, false, r.err
	case <-ctx.Done():
		l.dequeue(g, req)
		return Record{}, false, fmt.Errorf("fetch: loading %s/%d at %d: %w", topic, partition, offset, ctx.Err())
	case <-l.done:
		return Record{}, false, ErrLoaderClosed
	}
}

// Close makes later loads fail with ErrLoaderClosed, ends those waiting,
// closes the client and waits for the fetches under way.
func (l *Loader) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	err := l.client.Close()
	l.wg.Wait()
	// done is closed: a keep that has not made the cache by now never will.
	l.cacheMu.Lock()
	c := l.cache.Load()
	l.cacheMu.Unlock()
	if c != nil {
		c.close()
	}
	if err != nil && !errors.Is(err, sarama.ErrClosedClient) {
		return fmt.Errorf("closing the loader's client: %w", err)
	}
	return nil
}

// cached is k's record if the cache has it.
func (l *Loader) cached(k recordKey) (Record, bool) {
	if c := l.cache.Load(); c != nil {
		return c.get(k)
	}
	return Record{}, false
}

// keep puts a loaded record in the cache, making the cache if it is the
// first (and the loader is open and has one). A record kept as Close runs
// is dropped (lfucache).
func (l *Loader) keep(k recordKey, rec Record) {
	c := l.cache.Load()
	if c == nil {
		if l.opts.CacheSize <= 0 {
			return
		}
		l.cacheMu.Lock()
		select {
		case <-l.done:
			// closing: Close takes the cache after done is closed
		default:
			if c = l.cache.Load(); c == nil {
				c = newRecordCache(l.opts.CacheSize)
				l.cache.Store(c)
			}
		}
		l.cacheMu.Unlock()
		if c == nil {
			return
		}
	}
	c.put(k, rec)
}

// enqueue adds req to the group that pends its offset already, else to
// one whose next fetch starts at most DiscardThreshold before it, else to
// a new group.
func (l *Loader) enqueue(k recordKey, req *loadReq) (*loadGroup, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrLoaderClosed
	}
	groups := l.groups[k.partitionKey]
	var near *loadGroup
	for _, g := range groups {
		for _, r := range g.reqs {
			if r.offset == k.offset {
				g.reqs = append(g.reqs, req)
				return g, nil
			}
		}
		if near == nil && g.from <= k.offset && k.offset-g.from <= int64(l.opts.DiscardThreshold) {
			near = g
		}
	}
	if near != nil {
		near.reqs = append(near.reqs, req)
		return near, nil
	}
	g := &loadGroup{key: k.partitionKey, from: k.offset, reqs: []*loadReq{req}}
	l.groups[k.partitionKey] = append(groups, g)
	l.wg.Add(1)
	go l.run(g)
	return g, nil
}

// dequeue takes back a load whose context ended.
func (l *Loader) dequeue(g *loadGroup, req *loadReq) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range g.reqs {
		if r == req {
			g.reqs = append(g.reqs[:i], g.reqs[i+1:]...)
			return
		}
	}
}

// pending is the number of loads waiting for a fetch of a partition.
func (l *Loader) pending(topic string, partition int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, g := range l.groups[partitionKey{topic, partition}] {
		n += len(g.reqs)
	}
	return n
}

// readResult is what one read found: the records from its start on, the
// partition's high watermark, or an error.
type readResult struct {
	out blockRecords
	hwm int64
	err error
}

// run fetches for a group until no load is left in it.
func (l *Loader) run(g *loadGroup) {
	defer l.wg.Done()
	budget := l.opts.MaxBytes
	for {
		l.mu.Lock()
		if len(g.reqs) == 0 || l.closed {
			l.removeLocked(g)
			l.mu.Unlock()
			return
		}
		from := g.reqs[0].offset
		for _, r := range g.reqs[1:] {
			from = min(from, r.offset)
		}
		g.from = from
		l.mu.Unlock()

		var expired atomic.Bool
		done := make(chan readResult, 1)
		go func() { done <- l.read(g.key, from, &budget, &expired) }()
		timer := time.NewTimer(l.opts.SeekTimeout)
		select {
		case res := <-done:
			timer.Stop()
			l.resolve(g, from, res)
		case <-timer.C:
			// sarama cannot abandon a request under way; its own network
			// timeouts bound it. The loads waiting for it fail now, and
			// those that join meanwhile wait for the next read.
			expired.Store(true)
			l.fail(g, fmt.Errorf("fetch: loading %s/%d at %d: no answer within %v: %w",
				g.key.topic, g.key.partition, from, l.opts.SeekTimeout, ErrLoadTimeout))
			<-done
		case <-l.done:
			timer.Stop()
			<-done
		}
	}
}

func (l *Loader) removeLocked(g *loadGroup) {
	groups := l.groups[g.key]
	for i, o := range groups {
		if o == g {
			groups = append(groups[:i], groups[i+1:]...)
			break
		}
	}
	if len(groups) == 0 {
		delete(l.groups, g.key)
	} else {
		l.groups[g.key] = groups
	}
}

// fail resolves every load of the group with err.
func (l *Loader) fail(g *loadGroup, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range g.reqs {
		r.res <- loadResult{err: err}
	}
	g.reqs = g.reqs[:0]
}

// resolve hands the loads of a group what a read from offset from found,
// and keeps those it did not reach for the next read.
func (l *Loader) resolve(g *loadGroup, from int64, res readResult) {
	deleted := func(offset int64) error {
		return fmt.Errorf("fetch: loading %s/%d at %d: %w", g.key.topic, g.key.partition, offset, ErrOffsetDeleted)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if res.err != nil {
		if errors.Is(res.err, errOutOfRange) {
			// The offset the read started at is below the log's start or
			// past its end; others of the group may still be in range.
			res.out = blockRecords{next: from + 1}
		} else {
			err := fmt.Errorf("fetch: loading %s/%d at %d: %w", g.key.topic, g.key.partition, from, res.err)
			for _, r := range g.reqs {
				r.res <- loadResult{err: err}
			}
			g.reqs = g.reqs[:0]
			return
		}
	}
	out := res.out
	if out.next == from {
		// Nothing from the start on, with the offset within the log (past
		// its end the answer is OffsetOutOfRange): at or past the high
		// watermark, or (not expected of a leader) nothing below it. A
		// record loaded was read before, so it was below the high
		// watermark then: a leader elected since may not have advanced
		// its own that far yet. Either way the record may still be
		// served, and the load is retried, never taken as deleted.
		for _, r := range g.reqs {
			where := "below"
			if r.offset >= res.hwm {
				where = "at or past"
			}
			r.res <- loadResult{err: fault.Transient(fmt.Errorf("fetch: loading %s/%d at %d: empty fetch %s the high watermark %d",
				g.key.topic, g.key.partition, r.offset, where, res.hwm))}
		}
		g.reqs = g.reqs[:0]
		return
	}
	l.recent[l.next] = recentRead{key: g.key, from: from, next: out.next, records: out.records, occupied: true}
	l.next = (l.next + 1) % recentReads
	var found map[int64]Record
	keep := g.reqs[:0]
	for _, r := range g.reqs {
		if r.offset >= out.next {
			keep = append(keep, r)
			continue
		}
		rec, ok := found[r.offset]
		if !ok {
			if rec, ok = findRecord(out.records, r.offset); ok {
				rec = detached(rec)
				if found == nil {
					found = make(map[int64]Record)
				}
				found[r.offset] = rec
				l.keep(recordKey{g.key, r.offset}, rec)
			}
		}
		if ok {
			r.res <- loadResult{rec: rec}
		} else {
			// Inside what the read covered, yet not there: compaction
			// removed it (or it is a transaction marker).
			r.res <- loadResult{err: deleted(r.offset)}
		}
	}
	clear(g.reqs[len(keep):])
	g.reqs = keep
}

// fromRecent is the record k from a recent read that covered it, copied.
func (l *Loader) fromRecent(k recordKey) (Record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.recent {
		r := &l.recent[i]
		if r.occupied && r.key == k.partitionKey && r.from <= k.offset && k.offset < r.next {
			if rec, ok := findRecord(r.records, k.offset); ok {
				return detached(rec), true
			}
		}
	}
	return Record{}, false
}

// findRecord finds the record at offset in records, which are in offset
// order.
func findRecord(records []Record, offset int64) (Record, bool) {
	lo, hi := 0, len(records)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if records[m].Offset < offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(records) && records[lo].Offset == offset {
		return records[lo], true
	}
	return Record{}, false
}

// errOutOfRange is a read's answer OffsetOutOfRange.
var errOutOfRange = errors.New("offset out of range")

// read fetches the partition from offset from. It refreshes the metadata
// and tries once more when the leader is unknown or moved, or the broker
// connection failed, and doubles the budget for a record larger than it.
func (l *Loader) read(k partitionKey, from int64, budget *int32, expired *atomic.Bool) readResult {
	refreshed := false
	retry := func(cause error) bool {
		if refreshed || expired.Load() {
			return false
		}
		refreshed = true
		if err := l.client.RefreshMetadata(k.topic); err != nil {
			l.log.Debug("loader: refreshing metadata failed", slog.String("topic", k.topic), slog.Any("error", err))
		}
		l.log.Debug("loader: retrying a read", slog.String("topic", k.topic), slog.Int("partition", int(k.partition)),
			slog.Any("cause", cause))
		return true
	}
	for {
		if expired.Load() {
			return readResult{err: ErrLoadTimeout}
		}
		broker, epoch, err := l.client.LeaderAndEpoch(k.topic, k.partition)
		if err != nil {
			if retry(err) {
				continue
			}
			return readResult{err: kafkafault.Mark(fmt.Errorf("finding the leader: %w", err))}
		}
		req := &sarama.FetchRequest{
			// As the fetch loop (broker.go): version 12, no fetch session,
			// read uncommitted, so that a deferred record is found whatever
			// the fetch loop could read.
			Version:      12,
			MinBytes:     1,
			MaxWaitTime:  int32(loadMaxWait.Milliseconds()),
			MaxBytes:     *budget,
			Isolation:    sarama.ReadUncommitted,
			SessionID:    0,
			SessionEpoch: -1,
		}
		req.AddBlock(k.topic, k.partition, from, *budget, epoch)
		l.fetches.Add(1)
		if l.beforeFetch != nil {
			l.beforeFetch(k.topic, k.partition, from)
		}
		resp, err := broker.Fetch(req)
		if err != nil {
			select {
			case <-l.done:
				return readResult{err: ErrLoaderClosed}
			default:
			}
			// As the fetch loop: closed so that the client opens a new
			// connection on its next use.
			_ = broker.Close()
			if retry(err) {
				continue
			}
			return readResult{err: kafkafault.Mark(err)}
		}
		block := resp.GetBlock(k.topic, k.partition)
		if block == nil {
			if retry(errors.New("partition missing from the fetch response")) {
				continue
			}
			return readResult{err: fault.Transient(errors.New("partition missing from the fetch response"))}
		}
		switch {
		case errors.Is(block.Err, sarama.ErrNoError):
			out := records(block, from)
			if out.partial {
				if *budget >= maxLoadBytes {
					return readResult{err: fmt.Errorf("larger than %d bytes: %w", maxLoadBytes, ErrRecordTooLarge)}
				}
				*budget = int32(min(2*int64(*budget), maxLoadBytes, math.MaxInt32))
				continue
			}
			return readResult{out: out, hwm: block.HighWaterMarkOffset}
		case errors.Is(block.Err, sarama.ErrOffsetOutOfRange):
			return readResult{err: errOutOfRange}
		case leadership(block.Err) && retry(block.Err):
			continue
		default:
			return readResult{err: kafkafault.Mark(block.Err)}
		}
	}
}

// recordCache keeps loaded records, in ristretto: a cache in front of a
// log whose records never change, where refusing an entry (its admission
// policy keeps what is read often) or applying a Set late only costs a
// re-read. Keys are a hash of (topic, partition, offset); an entry keeps
// its key to tell a collision from a hit.
type recordCache struct {
	c    *lfucache.Cache[uint64, cacheEntry]
	seed maphash.Seed
}

type cacheEntry struct {
	key recordKey
	rec Record
}

func newRecordCache(size int) *recordCache {
	c, err := lfucache.New(&ristretto.Config[uint64, cacheEntry]{
		NumCounters: int64(max(size, 1)) * 10, // ristretto's advice: ten counters an entry
		MaxCost:     int64(max(size, 1)),      // one an entry
		BufferItems: 64,
		// Entries are counted, not weighed: the cost of each is 1.
		IgnoreInternalCost: true,
	})
	if err != nil {
		// Only an invalid configuration fails, and this one is valid.
		panic(fmt.Sprintf("fetch: the loader's cache: %v", err))
	}
	return &recordCache{c: c, seed: maphash.MakeSeed()}
}

func (c *recordCache) hash(k recordKey) uint64 {
	return maphash.String(c.seed, k.topic) ^ uint64(uint32(k.partition))*0x9e3779b97f4a7c15 ^ uint64(k.offset)*0xbf58476d1ce4e5b9
}

func (c *recordCache) get(k recordKey) (Record, bool) {
	e, ok := c.c.Get(c.hash(k))
	if !ok || e.key != k {
		return Record{}, false
	}
	return e.rec, true
}

func (c *recordCache) put(k recordKey, rec Record) {
	c.c.Set(c.hash(k), cacheEntry{key: k, rec: rec}, 1)
}

// wait applies the Sets under way (tests).
func (c *recordCache) wait() { c.c.Wait() }

func (c *recordCache) close() { c.c.Close() }
