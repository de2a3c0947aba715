package statestore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// A fill (caching what a read brought back from the store) races with
// writes of the same key: a read that started before a write can return
// after it, and caching its answer then would bring back what the write
// replaced. Keys are hashed onto stripes; a write marks its stripe busy
// for as long as it runs and bumps the stripe's sequence at both ends, and
// a fill is cached only if no write of the stripe started since the read
// began. Unrelated keys sharing a stripe cost a missed fill now and then,
// never a stale answer, and the structure stays small and exact however
// many keys pass through.
const guardStripes = 1024

// genSlots is the number of map generations. A map's cached entries are
// keyed by its generation, so a Clear, which cannot list the entries it
// removes, makes all of them unreachable by bumping it. Maps share slots
// by hash: a Clear then also hides the cached entries of another map in
// its slot (a miss, not a wrong answer), one chance in genSlots.
const genSlots = 1 << 16

type guardStripe struct {
	mu      sync.Mutex
	writing int    // writes of the stripe now running
	seq     uint64 // bumped when a write starts and when it ends
}

type guard struct {
	seed    maphash.Seed
	stripes [guardStripes]guardStripe
	gens    [genSlots]atomic.Uint64
}

func newGuard() *guard { return &guard{seed: maphash.MakeSeed()} }

func (g *guard) stripe(k Key) *guardStripe {
	var h maphash.Hash
	h.SetSeed(g.seed)
	h.WriteString(k.Namespace)
	h.WriteByte(0)
	h.WriteString(k.Key)
	return &g.stripes[h.Sum64()%guardStripes]
}

func (g *guard) gen(k Key, collection string) *atomic.Uint64 {
	var h maphash.Hash
	h.SetSeed(g.seed)
	h.WriteString(k.Namespace)
	h.WriteByte(0)
	h.WriteString(k.Key)
	h.WriteByte(0)
	h.WriteString(collection)
	return &g.gens[h.Sum64()%genSlots]
}

func (s *guardStripe) begin() {
	s.mu.Lock()
	s.writing++
	s.seq++
	s.mu.Unlock()
}

func (s *guardStripe) end() {
	s.mu.Lock()
	s.writing--
	s.seq++
	s.mu.Unlock()
}

// snapshot is taken before a read that may fill the cache; ok is false
// while a write runs (its outcome may be half visible to the read).
func (s *guardStripe) snapshot() (seq uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq, s.writing == 0
}

// fill runs set if no write started since the snapshot. set runs under
// the stripe's lock, so a write that starts later begins after the fill's
// Set was buffered, and its Del (and Wait) come after it.
func (s *guardStripe) fill(seq uint64, set func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq == seq {
		set()
	}
}
