package middleware

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/dedupstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

// failingStore is a memory store whose reads or writes fail.
// failingStore is a store over the network (not Immediate: it keeps the
// in-memory store in a field, not embedded) whose calls may fail.
type failingStore struct {
	mem                   dedupstore.Memory
	failReads, failWrites bool
}

func (s failingStore) Exists(id dedupstore.ID, done func(bool, error)) {
	if s.failReads {
		done(false, errors.New("read refused"))
		return
	}
	s.mem.Exists(id, done)
}

func (s failingStore) Record(id dedupstore.ID, done func(error)) {
	if s.failWrites {
		done(errors.New("write refused"))
		return
	}
	s.mem.Record(id, done)
}

// The layer's decisions (core-behavior.md §4.3, §1(e)): what runs the
// handler, what is recorded, and that a failing store never fails the
// message.
func TestDeduplication(t *testing.T) {
	msg := func(offset int64, id string) *event.Message {
		m := &event.Message{Topic: "t", Partition: 1, Offset: offset, Key: "k"}
		if id != "" {
			m.ID, m.HasID = id, true
		}
		return m
	}
	tests := []struct {
		name                  string
		failReads, failWrites bool
		result                error // the handler's
		first, again          *event.Message
		handledAgain          bool // the handler runs for again
		recorded              bool // first's id is in the store afterwards
		wantErr               bool // first's outcome is an error
		log                   string
	}{
		{name: "same id at another offset", first: msg(1, "e"), again: msg(7, "e"), recorded: true},
		{name: "no id: the same offset", first: msg(1, ""), again: msg(1, ""), recorded: true},
		{name: "no id: another offset", first: msg(1, ""), again: msg(2, ""), handledAgain: true, recorded: true},
		{name: "another id", first: msg(1, "e"), again: msg(1, "f"), handledAgain: true, recorded: true},
		{name: "a permanent failure is recorded", result: fault.Permanent(errors.New("bad")), first: msg(1, "e"), again: msg(2, "e"), recorded: true, wantErr: true},
		{name: "a transient failure is not", result: errors.New("later"), first: msg(1, "e"), again: msg(2, "e"), handledAgain: true, wantErr: true},
		{name: "a failed read is a miss", failReads: true, first: msg(1, "e"), again: msg(2, "e"), recorded: true,
			log: "deduplication store read failed"},
		{name: "a failed write is logged; the cache still knows", failWrites: true, first: msg(1, "e"), again: msg(2, "e"),
			log: "deduplication store write failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids := dedupstore.NewMemory(time.Hour)
			logs := &logRecorder{}
			d := dedup.New(dedup.Options{Version: "1", Group: "g", CacheSize: 64,
				Store: failingStore{mem: ids, failReads: tt.failReads, failWrites: tt.failWrites}, Logger: slog.New(logs)})
			var calls atomic.Int32
			result := tt.result
			stack := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error {
				calls.Add(1)
				err := result
				result = nil
				return err
			}), nil), NewDeduplication(d))
			ctx, cancel := newInv()
			defer cancel(nil)
			if err := invoke(stack, ctx, tt.first); (err != nil) != tt.wantErr {
				t.Fatalf("first outcome %v, want an error: %v", err, tt.wantErr)
			}
			if err := d.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			found := make(chan bool, 1)
			ids.Exists(d.ID(tt.first), func(ok bool, _ error) { found <- ok })
			if got := <-found; got != tt.recorded {
				t.Fatalf("recorded %v, want %v", got, tt.recorded)
			}
			if tt.failReads || tt.failWrites {
				// Only the cache can answer: let its add land.
				eventually(t, "the cache to hold the id", func() bool {
					seen := make(chan bool, 1)
					d.Check(tt.again, d.ID(tt.again), func(s bool) { seen <- s })
					return <-seen
				})
			}
			before := calls.Load()
			if err := invoke(stack, ctx, tt.again); err != nil {
				t.Fatalf("second outcome %v", err)
			}
			if handled := calls.Load() > before; handled != tt.handledAgain {
				t.Fatalf("the second message handled: %v, want %v", handled, tt.handledAgain)
			}
			if tt.log != "" && !strings.Contains(strings.Join(logs.lines(), "\n"), tt.log) {
				t.Fatalf("log %q missing from %v", tt.log, logs.lines())
			}
			if skipped := d.Stats().Skipped; (skipped > 0) == tt.handledAgain {
				t.Fatalf("skipped %d, handled again %v", skipped, tt.handledAgain)
			}
		})
	}
}

// Timers are never deduplicated: the same timer twice runs twice.
func TestDeduplicationPassesTimers(t *testing.T) {
	d := dedup.New(dedup.Options{Group: "g", CacheSize: 8, Store: dedupstore.NewMemory(time.Hour)})
	var calls atomic.Int32
	stack := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { calls.Add(1); return nil }), nil), NewDeduplication(d))
	ctx, cancel := newInv()
	defer cancel(nil)
	timer := &event.Timer{Topic: "t", Key: "k", Time: time.Unix(100, 0)}
	for range 2 {
		if err := invoke(stack, ctx, timer); err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("the timer ran %d times, want 2", calls.Load())
	}
}

// Local is false: the store stands for Cassandra, with the cache in front.

// heldWrites is a store over the network whose reads answer at once
// (absent) and whose writes land when the test says.
type heldWrites struct {
	mu     chan struct{} // a one-slot lock
	writes []func()
}

func (s *heldWrites) Exists(_ dedupstore.ID, done func(bool, error)) { done(false, nil) }

func (s *heldWrites) Record(_ dedupstore.ID, done func(error)) {
	s.mu <- struct{}{}
	s.writes = append(s.writes, func() { done(nil) })
	<-s.mu
}

func (s *heldWrites) land() {
	s.mu <- struct{}{}
	ws := s.writes
	s.writes = nil
	<-s.mu
	for _, w := range ws {
		w()
	}
}

// A partition let go (Stack.Released) waits for the ids its handled
// messages recorded to be written, so that its final commit follows
// them: the handler's outcome did not wait for the write.
func TestReleasedWaitsForThePartitionsWrites(t *testing.T) {
	s := &heldWrites{mu: make(chan struct{}, 1)}
	d := dedup.New(dedup.Options{Version: "1", Group: "g", CacheSize: 64, Store: s})
	stack := NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { return nil }), nil), NewDeduplication(d))
	ctx, cancel := newInv()
	defer cancel(nil)
	msg := &event.Message{Topic: "t", Partition: 3, Key: "k", Offset: 1, ID: "e", HasID: true}
	if err := invoke(stack, ctx, msg); err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer stop()
	if err := stack.Released(short, "t", 3); err == nil {
		t.Fatal("Released returned before the partition's write landed")
	}
	s.land()
	if err := stack.Released(context.Background(), "t", 3); err != nil {
		t.Fatal(err)
	}
}
