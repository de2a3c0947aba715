package dedup

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/dedupstore"
	"github.com/prosody-events/prosody-go/core/event"
)

// heldStore is a store over the network whose calls finish when the test
// says: each waits in a queue until released.
type heldStore struct {
	mu      sync.Mutex
	ids     map[ID]bool
	reads   []func()
	writes  []func()
	lookups int
}

func newHeldStore() *heldStore { return &heldStore{ids: map[ID]bool{}} }

func (s *heldStore) Exists(id dedupstore.ID, done func(bool, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	found := s.ids[id] // read when asked, as a lookup that raced a write would
	s.reads = append(s.reads, func() { done(found, nil) })
}

func (s *heldStore) Record(id dedupstore.ID, done func(error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, func() {
		s.mu.Lock()
		s.ids[id] = true
		s.mu.Unlock()
		done(nil)
	})
}

// release finishes every call waiting so far, reads first.
func (s *heldStore) release() {
	s.mu.Lock()
	calls := append(s.reads, s.writes...)
	s.reads, s.writes = nil, nil
	s.mu.Unlock()
	for _, f := range calls {
		f()
	}
}

func check(d *Deduplicator, s *heldStore, msg *event.Message) bool {
	got := make(chan bool, 1)
	d.Check(msg, d.ID(msg), func(seen bool) { got <- seen })
	for {
		select {
		case seen := <-got:
			return seen
		default:
			s.release()
		}
	}
}

// A recorded message counts as seen at once, before its write lands; a
// lookup prefetched before it was recorded (which says absent) is not
// trusted after; Flush waits for the writes.
func TestRecordIsSeenBeforeItsWriteLands(t *testing.T) {
	s := newHeldStore()
	d := New(Options{Version: "1", Group: "g", CacheSize: 64, Store: s})
	first := &event.Message{Topic: "t", Key: "k", Offset: 1, ID: "e", HasID: true}
	dup := &event.Message{Topic: "t", Key: "k", Offset: 2, ID: "e", HasID: true}

	d.Prefetch([]*event.Message{first})
	d.Prefetch([]*event.Message{dup}) // the same id: one lookup serves both
	if s.lookups != 1 {
		t.Fatalf("%d lookups for one id, want 1", s.lookups)
	}
	s.release() // the prefetched answer: absent
	if check(d, s, first) {
		t.Fatal("a new message seen")
	}
	recorded := make(chan struct{})
	d.Record(first, d.ID(first), func() { close(recorded) })
	select {
	case <-recorded:
	case <-time.After(time.Second):
		t.Fatal("Record waited for its write")
	}
	if !check(d, s, dup) {
		t.Fatal("a copy of a recorded message, its write not landed, not seen")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := d.Flush(ctx); err == nil {
		t.Fatal("Flush returned with a write waiting")
	}
	s.release()
	if err := d.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.ids[d.ID(first)] {
		t.Fatal("the id never reached the store")
	}
	// A new process: a cold cache, the store's answer.
	d2 := New(Options{Version: "1", Group: "g", CacheSize: 64, Store: s})
	if !check(d2, s, dup) {
		t.Fatal("a copy not seen from the store")
	}
	if d.Stats().Skipped != 1 || d2.Stats().Skipped != 1 {
		t.Fatalf("skipped %d and %d, want 1 each", d.Stats().Skipped, d2.Stats().Skipped)
	}
}

// touchingStore is a store in memory that counts what it is asked.
type touchingStore struct {
	dedupstore.Memory
	touched []ID
}

func (s *touchingStore) Touch(id dedupstore.ID) {
	s.touched = append(s.touched, id)
	s.Memory.Touch(id)
}

// TestPrefetchInMemory: a burst admitted to a deduplicator over a store in
// memory gets its ids worked out, kept in the messages (the steps before
// and after the handler use them), and touched, one each.
func TestPrefetchInMemory(t *testing.T) {
	store := &touchingStore{Memory: dedupstore.NewMemory(time.Hour)}
	d := New(Options{Version: "v1", Group: "g", CacheSize: 8, Store: store})
	if !d.Immediate() {
		t.Fatal("a store in memory is not Immediate")
	}
	msgs := []*event.Message{
		{Topic: "t", Partition: 1, Offset: 10, Key: "a", ID: "e1", HasID: true},
		{Topic: "t", Partition: 1, Offset: 11, Key: "b"},
	}
	d.Prefetch(msgs)
	if len(store.touched) != len(msgs) {
		t.Fatalf("touched %d ids, want %d", len(store.touched), len(msgs))
	}
	for i, msg := range msgs {
		want := MessageID("v1", "g", msg)
		if msg.DedupID != want || store.touched[i] != want || d.ID(msg) != want {
			t.Fatalf("message %d: kept id %x, touched %x, ID %x; want %x", i, msg.DedupID, store.touched[i], d.ID(msg), want)
		}
	}
	d.Recorded(d.ID(msgs[0]))
	if !d.Seen(msgs[0], d.ID(msgs[0])) || d.Seen(msgs[1], d.ID(msgs[1])) {
		t.Fatal("the recorded message is not seen, or the other one is")
	}
}

// A lookup prefetched for a message that then never ran here (its
// partition was revoked before) is dropped when the partition is let go
// (Forget): should the partition come back after its next owner handled
// the message, the message's redelivery asks the store again rather than
// taking the old "absent" (found in review).
func TestForgetDropsAReleasedPartitionsLookups(t *testing.T) {
	s := newHeldStore()
	d := New(Options{Version: "1", Group: "g", CacheSize: 64, Store: s})
	msg := func(partition int32) *event.Message {
		return &event.Message{Topic: "t", Partition: partition, Key: "k", Offset: 7, ID: "e", HasID: true}
	}
	other := &event.Message{Topic: "t", Partition: 1, Key: "k2", Offset: 7, ID: "e2", HasID: true}
	d.Prefetch([]*event.Message{msg(0), other})
	s.release() // both answered: absent
	d.Forget("t", 0)

	// Another process handles the message and records it.
	s.ids[d.ID(msg(0))] = true

	// The partition comes back; the message is redelivered.
	again := msg(0)
	d.Prefetch([]*event.Message{again})
	if !check(d, s, again) {
		t.Fatal("a message handled by the partition's last owner was not seen: an answer from before the partition left was taken")
	}
	// Another partition's prefetched answer stays.
	before := s.lookups
	if check(d, s, other) {
		t.Fatal("a new message seen")
	}
	if s.lookups != before {
		t.Fatal("Forget of partition 0 dropped partition 1's prefetched lookup")
	}
}

// FlushPartition waits for the writes of one partition's handled
// messages only: those another partition goes on recording do not hold
// it up.
func TestFlushPartition(t *testing.T) {
	s := newHeldStore()
	d := New(Options{Version: "1", Group: "g", CacheSize: 64, Store: s})
	mine := &event.Message{Topic: "t", Partition: 0, Key: "k", Offset: 1, ID: "a", HasID: true}
	theirs := &event.Message{Topic: "t", Partition: 1, Key: "k", Offset: 1, ID: "b", HasID: true}
	d.Record(mine, d.ID(mine), func() {})
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	if err := d.FlushPartition(short(), "t", 0); err == nil {
		t.Fatal("FlushPartition returned with the partition's write waiting")
	}
	s.release()
	d.Record(theirs, d.ID(theirs), func() {}) // another partition's, not landed
	if err := d.FlushPartition(short(), "t", 0); err != nil {
		t.Fatalf("FlushPartition waited for another partition's write: %v", err)
	}
	if err := d.FlushPartition(short(), "t", 1); err == nil {
		t.Fatal("FlushPartition of partition 1 returned with its write waiting")
	}
	s.release()
	if err := d.Flush(short()); err != nil {
		t.Fatal(err)
	}
}
