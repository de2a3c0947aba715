package state

import (
	"context"
	"slices"
	"strings"

	"github.com/prosody-events/prosody-go/core/statestore"
)

// ChunkSize is the most items a cursor returns at a time.
const ChunkSize = 256

// Item is one item of a scan: a map entry (Key, and Value unless the scan
// is keys-only) or a deque item (Value).
type Item struct {
	Key   string
	Value []byte
}

// Cursor is a scan of a collection in chunks. Chunks stay ordered and
// distinct across their boundaries. A cursor of a handle expires with its
// attempt; its calls are serialised.
type Cursor struct {
	t      *Txn // nil for a reader's cursor
	next   func(ctx context.Context) ([]Item, error)
	ctx    context.Context // a reader's cursor: the context of its calls
	done   bool
	closed bool
}

// Next returns the next chunk of at most ChunkSize items, or nil once the
// scan is over.
func (c *Cursor) Next() ([]Item, error) {
	if c.t != nil {
		if err := c.t.begin(); err != nil {
			return nil, err
		}
		defer c.t.mu.Unlock()
		return c.pull(c.t.ctx)
	}
	return c.pull(c.ctx)
}

func (c *Cursor) pull(ctx context.Context) ([]Item, error) {
	if c.done || c.closed {
		return nil, nil
	}
	items, err := c.next(ctx)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		c.done = true
		return nil, nil
	}
	return items, nil
}

// Close ends the scan; later Next calls return nil.
func (c *Cursor) Close() {
	if c.t != nil {
		c.t.mu.Lock()
		defer c.t.mu.Unlock()
	}
	c.closed = true
}

// before reports whether a comes before b in direction dir.
func before(dir statestore.Direction, a, b string) bool {
	if dir == statestore.Backward {
		return a > b
	}
	return a < b
}

// mapScan walks a map: the store's entries after the last key returned,
// merged with the attempt's staged ones.
type mapScan struct {
	m        *Map
	dir      statestore.Direction
	keysOnly bool
	last     string
	hasLast  bool
	done     bool
}

func (s *mapScan) chunk(ctx context.Context) ([]Item, error) {
	out := make([]Item, 0, 16)
	for len(out) < ChunkSize && !s.done {
		var stored []statestore.Entry
		if !s.m.s.cleared {
			var err error
			stored, err = s.m.t.p.svc.store.MapScan(ctx, s.m.t.key(), s.m.s.def.Name, s.dir, s.last, s.hasLast,
				ChunkSize, s.keysOnly)
			if err != nil {
				return nil, storeError("scanning "+s.m.s.def.Name, err)
			}
		}
		// With a full page from the store, staged keys past its last are
		// not yet comparable with the store's next page.
		full := len(stored) == ChunkSize
		var horizon string
		if full {
			horizon = stored[len(stored)-1].Key
		}
		staged := s.stagedAfter()
		i, j := 0, 0
		for len(out) < ChunkSize {
			var k string
			var v []byte
			takeStaged := false
			switch {
			case i < len(stored) && j < len(staged):
				if staged[j] == stored[i].Key {
					i++ // the staged entry decides
					takeStaged = true
				} else {
					takeStaged = before(s.dir, staged[j], stored[i].Key)
				}
			case j < len(staged):
				takeStaged = !full || !before(s.dir, horizon, staged[j])
				if !takeStaged {
					j = len(staged) // past the horizon: the next page
					continue
				}
			case i < len(stored):
			default:
				goto pageDone
			}
			if takeStaged {
				k = staged[j]
				v = s.m.s.puts[k]
				j++
				s.last, s.hasLast = k, true
				if v == nil {
					continue // removed
				}
				if s.keysOnly {
					v = nil
				}
			} else {
				k, v = stored[i].Key, stored[i].Value
				i++
				s.last, s.hasLast = k, true
			}
			out = append(out, Item{Key: k, Value: v})
		}
		continue
	pageDone:
		if !full {
			s.done = true
		}
	}
	return out, nil
}

// stagedAfter lists the staged keys after the last one returned, in scan
// order.
func (s *mapScan) stagedAfter() []string {
	var keys []string
	for k := range s.m.s.puts {
		if !s.hasLast || before(s.dir, s.last, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if s.dir == statestore.Backward {
			return strings.Compare(b, a)
		}
		return strings.Compare(a, b)
	})
	return keys
}
