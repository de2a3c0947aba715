package statestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/fault"
)

// Both stores keep a key's state as rows addressed by (collection, item),
// ordered by collection and then bytewise by item, exactly as Cassandra
// orders the clustering columns of state_entries. Compiling a Write into
// row operations once, here, is what makes the memory store a faithful
// model of the Cassandra one rather than a second interpretation of Change.
//
//   - a value is the row at item "" (the empty blob);
//   - a map entry is the row at the UTF-8 bytes of its key;
//   - a deque's bounds are the row at item "", each slot the row at
//     slotItem(index), eight bytes that sort as the index does;
//   - a marker is the row at collection "" (no collection has that name),
//     item = the source, value = the offset.
const (
	valueItem   = ""
	boundsItem  = ""
	markerColl  = ""
	boundsBytes = 16
	offsetBytes = 8
)

// MaxItemSize is the largest item a Write may hold: a value, a map entry
// (key and value) or a deque slot. Apply refuses a write with a larger
// one, before writing anything, with a permanent error. An item is one
// mutation of its own at least, and Cassandra refuses a mutation over
// max_mutation_size (by default half the 32 MiB commit-log segment, and
// 4 MiB on small test servers with 8 MiB segments); one over it could be
// recorded as pending but never applied. 1 MiB stays well under both,
// with room for the row's other cells and the mutation's overhead.
const MaxItemSize = 1 << 20

// maxTTL is Cassandra's limit on a TTL (20 years); the memory store
// enforces it too, so a write one store accepts the other does not refuse.
const maxTTL = 630720000 * time.Second

// slotItem encodes a deque index so that bytewise order is numeric order:
// flipping the sign bit maps MinInt64..MaxInt64 onto 0..MaxUint64.
func slotItem(i int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i)^(1<<63))
	return string(b[:])
}

func slotIndex(item []byte) (int64, error) {
	if len(item) != 8 {
		return 0, fmt.Errorf("deque slot item of %d bytes, want 8", len(item))
	}
	return int64(binary.BigEndian.Uint64(item) ^ (1 << 63)), nil
}

func encodeBounds(b Bounds) []byte {
	out := make([]byte, boundsBytes)
	binary.BigEndian.PutUint64(out, uint64(b.Head))
	binary.BigEndian.PutUint64(out[8:], uint64(b.Tail))
	return out
}

func decodeBounds(v []byte) (Bounds, error) {
	if len(v) != boundsBytes {
		return Bounds{}, fmt.Errorf("deque bounds of %d bytes, want %d", len(v), boundsBytes)
	}
	return Bounds{Head: int64(binary.BigEndian.Uint64(v)), Tail: int64(binary.BigEndian.Uint64(v[8:]))}, nil
}

func encodeOffset(o int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(o)) }

func decodeOffset(v []byte) (int64, error) {
	if len(v) != offsetBytes {
		return 0, fmt.Errorf("marker of %d bytes, want %d", len(v), offsetBytes)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// opKind orders a Write's effects: every deletion applies before every
// insertion (Cassandra: deletions at timestamp T, insertions at T+1), so a
// Clear, Remove or Drop never erases a row the same Write puts.
type opKind uint8

const (
	opDeleteCollection opKind = iota // every row of coll
	opDeleteRow                      // the row (coll, item)
	opDeleteRange                    // rows of coll with from <= item < to
	opPut                            // the row (coll, item) = value, for ttl
)

type rowOp struct {
	kind     opKind
	coll     string
	item     string // the row, or the start of the range
	to       string // end of an opDeleteRange (exclusive)
	value    []byte // opPut only
	ttl      time.Duration
	isMarker bool
}

// compiled is a Write reduced to row operations: deletions first, then
// insertions, the marker last (the Cassandra store puts it in the last
// part of a write too large for one batch).
type compiled struct {
	deletes []rowOp
	puts    []rowOp
}

var errEmptyCollection = errors.New("collection name is empty (reserved for markers)")

// compile turns w into row operations. elapsed shortens every TTL: a write
// settled late must not make its rows outlive what they would have had
// (a put whose TTL has fully elapsed is skipped, its deletions are not).
func compile(w Write, elapsed time.Duration) (compiled, error) {
	var c compiled
	put := func(coll, item string, value []byte, ttl time.Duration) {
		if ttl > 0 {
			if ttl -= elapsed; ttl <= 0 {
				return
			}
		}
		c.puts = append(c.puts, rowOp{kind: opPut, coll: coll, item: item, value: value, ttl: ttl})
	}
	for _, ch := range w.Changes {
		if ch.Collection == markerColl {
			return compiled{}, fault.Terminal(fmt.Errorf("statestore: %w", errEmptyCollection))
		}
		if ch.TTL < 0 || ch.TTL > maxTTL {
			return compiled{}, fault.Terminal(fmt.Errorf("statestore: collection %q: TTL %v outside [0, %v]", ch.Collection, ch.TTL, maxTTL))
		}
		if err := checkItemSizes(ch); err != nil {
			return compiled{}, err
		}
		if ch.Clear {
			c.deletes = append(c.deletes, rowOp{kind: opDeleteCollection, coll: ch.Collection})
		}
		switch ch.Kind {
		case config.CollectionValue:
			if ch.Value != nil {
				put(ch.Collection, valueItem, ch.Value, ch.TTL)
			}
		case config.CollectionMap:
			for _, k := range ch.Removes {
				c.deletes = append(c.deletes, rowOp{kind: opDeleteRow, coll: ch.Collection, item: k})
			}
			for _, e := range ch.Puts {
				// A put of a nil value would be a row without a value,
				// which reads back as absent in neither store: store it
				// as the empty value it stands for.
				v := e.Value
				if v == nil {
					v = []byte{}
				}
				put(ch.Collection, e.Key, v, ch.TTL)
			}
		case config.CollectionDeque:
			for _, r := range ch.Drops {
				if r.From < r.To {
					c.deletes = append(c.deletes, rowOp{kind: opDeleteRange, coll: ch.Collection, item: slotItem(r.From), to: slotItem(r.To)})
				}
			}
			if ch.Bounds != nil {
				put(ch.Collection, boundsItem, encodeBounds(*ch.Bounds), ch.TTL)
			}
			for _, s := range ch.Slots {
				v := s.Value
				if v == nil {
					v = []byte{}
				}
				put(ch.Collection, slotItem(s.Index), v, ch.TTL)
			}
		default:
			return compiled{}, fault.Terminal(fmt.Errorf("statestore: collection %q has unknown kind %q", ch.Collection, ch.Kind))
		}
	}
	if m := w.Marker; m != nil {
		// The marker lives exactly as long as it was given, whatever the
		// changes' TTLs (see Marker.TTL).
		if m.TTL < 0 || m.TTL > maxTTL {
			return compiled{}, fault.Terminal(fmt.Errorf("statestore: marker of %s: TTL %v outside [0, %v]", m.Source, m.TTL, maxTTL))
		}
		ttl := m.TTL
		if ttl == 0 || ttl > elapsed {
			if ttl > 0 {
				ttl -= elapsed
			}
			c.puts = append(c.puts, rowOp{kind: opPut, coll: markerColl, item: m.Source,
				value: encodeOffset(m.Offset), ttl: ttl, isMarker: true})
		}
	}
	return c, nil
}

// checkItemSizes refuses a change holding an item over MaxItemSize. The
// error is permanent: the same write fails the same way every time.
func checkItemSizes(ch Change) error {
	tooLarge := func(what string, size int) error {
		return fault.Permanent(fmt.Errorf("statestore: collection %q: %s of %d bytes exceeds the limit of %d (MaxItemSize)",
			ch.Collection, what, size, MaxItemSize))
	}
	if len(ch.Value) > MaxItemSize {
		return tooLarge("value", len(ch.Value))
	}
	for _, e := range ch.Puts {
		if n := len(e.Key) + len(e.Value); n > MaxItemSize {
			return tooLarge(fmt.Sprintf("map entry (key of %d bytes and value)", len(e.Key)), n)
		}
	}
	for _, sl := range ch.Slots {
		if len(sl.Value) > MaxItemSize {
			return tooLarge(fmt.Sprintf("deque slot %d", sl.Index), len(sl.Value))
		}
	}
	return nil
}

// ttlSeconds rounds a TTL up to whole seconds, as both stores keep it, so
// a row never expires before the TTL asked for.
func ttlSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(min((d+time.Second-1)/time.Second, math.MaxInt32))
}
