//go:build capitest

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/state"
)

// The statuses of the header, pinned here as the numbers hosts compile in.
const (
	wantTransient = 5
	wantPermanent = 6
	wantTerminal  = 7
	wantClosed    = 9
	wantNullValue = 12
)

func TestStateErrorStatus(t *testing.T) {
	live := event.NewContext(context.Background(), "k")
	parent, cancel := context.WithCancelCause(context.Background())
	cancel(event.ErrRevoked)
	revoked := event.NewContext(parent, "k")
	tests := []struct {
		name   string
		ctx    *event.Context
		err    error
		status int
		substr string
	}{
		{"null", live, state.ErrNullValue, wantNullValue, "null"},
		{"wrapped null", live, fmt.Errorf("writing: %w", state.ErrNullValue), wantNullValue, "null"},
		{"invalid item", live, state.ErrInvalidItem, wantTransient, "invalid"},
		{"expired", live, state.ErrExpired, wantTransient, "no longer valid"},
		{"store", live, state.ErrStore, wantTransient, "store"},
		{"unregistered", live, state.ErrUnregistered, wantPermanent, "not registered"},
		{"revoked", live, event.ErrRevoked, wantTerminal, "revoked"},
		{"timeout", live, event.ErrTimeout, wantTransient, "timed out"},
		{"ended", live, event.ErrInvalidContext, wantTransient, "no longer valid"},
		// The store saw the context cancelled: its cause decides.
		{"cancelled by revocation", revoked, context.Canceled, wantTerminal, "revoked"},
		{"unknown", live, errors.New("boom"), wantTransient, "boom"},
		{"client released", live, errReleased, wantClosed, "released"},
		{"client closed", live, client.ErrClosed, wantClosed, "closed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := stateError("prosody_state_call", tc.ctx.Check, tc.err)
			if got := int(statusOf(err)); got != tc.status {
				t.Errorf("status %d, want %d (%v)", got, tc.status, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "prosody_state_call: ") || !strings.Contains(msg, tc.substr) {
				t.Errorf("message %q: want the function and %q", msg, tc.substr)
			}
			// Classifying twice changes nothing.
			if again := stateError("x", tc.ctx.Check, err); again.Error() != err.Error() || statusOf(again) != statusOf(err) {
				t.Errorf("reclassified: %v", again)
			}
		})
	}
	if stateError("f", live.Check, nil) != nil {
		t.Error("nil is not an error")
	}
}

// The functions of one queue run one at a time, in the order they were
// queued, also when a function queues more.
func TestOpQueueOrder(t *testing.T) {
	var q opQueue
	var mu sync.Mutex
	var got []int
	running := 0
	var wg sync.WaitGroup
	const n = 2000
	wg.Add(n + 1)
	for i := 0; i < n; i++ {
		q.enqueue(func() {
			defer wg.Done()
			mu.Lock()
			running++
			if running != 1 {
				t.Errorf("%d functions of one queue ran at once", running)
			}
			got = append(got, i)
			mu.Unlock()
			if i == n/2 {
				q.enqueue(func() {
					defer wg.Done()
					mu.Lock()
					got = append(got, -1)
					mu.Unlock()
				})
			}
			mu.Lock()
			running--
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != n+1 {
		t.Fatalf("ran %d functions, want %d", len(got), n+1)
	}
	next := 0
	for at, i := range got {
		switch {
		case i == -1 && next <= n/2:
			t.Fatalf("the function queued by function %d ran in place %d, before it", n/2, at)
		case i == -1:
		case i != next:
			t.Fatalf("function %d ran in place %d, want %d", i, at, next)
		default:
			next++
		}
	}
}

// Releasing a client releases what it owns once, forgets what the host
// released itself, and refuses what comes later.
func TestOwnedReleaseAll(t *testing.T) {
	var o owned
	released := map[uint64]int{}
	for id := uint64(1); id <= 3; id++ {
		if !o.adopt(id, func() { released[id]++ }) {
			t.Fatalf("adopt %d refused", id)
		}
	}
	o.forget(2)
	o.releaseAll()
	if released[1] != 1 || released[2] != 0 || released[3] != 1 {
		t.Fatalf("released %v", released)
	}
	if o.adopt(4, func() { released[4]++ }) {
		t.Fatal("adopted after the release")
	}
	o.releaseAll()
	if released[1] != 1 || released[4] != 0 {
		t.Fatalf("released again: %v", released)
	}
}

// What the host reads: keys for map entries only (the empty key too), a
// NULL value for an absent entry or a keys-only scan, every byte exact.
func TestStateItemsLayout(t *testing.T) {
	if got := showItems(nil, true); got != nil {
		t.Fatalf("no items: %v", got)
	}
	items := []state.Item{
		{Key: "a\x00b", Value: []byte(`{"x":1}`)},
		{Key: "", Value: []byte(`2`)},
		{Key: "absent"},
		{Key: "é", Value: []byte(`"\u0000"`)},
	}
	got := showItems(items, true)
	for i, it := range items {
		g := got[i]
		if g.keyNull || !bytes.Equal(g.key, []byte(it.Key)) {
			t.Errorf("item %d: key %q (null %v), want %q", i, g.key, g.keyNull, it.Key)
		}
		if g.valueNull != (it.Value == nil) || !bytes.Equal(g.value, it.Value) {
			t.Errorf("item %d: value %q (null %v), want %q", i, g.value, g.valueNull, it.Value)
		}
	}
	for i, g := range showItems([]state.Item{{Value: []byte("1")}, {Value: []byte("[2]")}}, false) {
		if !g.keyNull || len(g.key) != 0 || g.valueNull {
			t.Errorf("deque item %d: %+v", i, g)
		}
	}
}

// A reader's cache window: the client's, none, or milliseconds, without
// overflowing.
func TestReaderCacheTTL(t *testing.T) {
	if _, set := cacheTTL(-1).Get(); set {
		t.Error("-1: want the client's window")
	}
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{{0, 0}, {1500, 1500 * time.Millisecond}, {math.MaxInt64, math.MaxInt64 / time.Millisecond * time.Millisecond}} {
		if got, set := cacheTTL(tc.ms).Get(); !set || got != tc.want {
			t.Errorf("%d ms: %v (set %v), want %v", tc.ms, got, set, tc.want)
		}
	}
}
