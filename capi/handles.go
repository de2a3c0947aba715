package main

/*
#include "shims.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// kind tags a handle with the type of object it names. The tag lives in
// the low 8 bits of the id, so a wrong-kind handle is recognised, and
// reported as such, without a lookup.
type kind uint8

const (
	kindClient kind = 1
	kindAdmin  kind = 2
	kindEvent  kind = 3
	kindState  kind = 4
	kindCursor kind = 5
	kindReader kind = 6
)

func (k kind) String() string {
	switch k {
	case kindClient:
		return "client"
	case kindAdmin:
		return "admin"
	case kindEvent:
		return "event"
	case kindState:
		return "state"
	case kindCursor:
		return "cursor"
	case kindReader:
		return "reader"
	}
	return fmt.Sprintf("unknown-kind(%d)", uint8(k))
}

// lastID counts handles; ids are never reused within a process (2^56 ids
// is more than any process can make).
var lastID atomic.Uint64

func newID(k kind) uint64 { return lastID.Add(1)<<8 | uint64(k) }

// table maps handles of one kind to their objects: clients, admin clients,
// state handles, cursors and readers (events have a table of their own,
// eventtable.go).
//
// It is split into shards by id: a client is looked up by every call the
// host makes on it (each send, each poll), from any of its threads, and a
// host thread that blocks in Go costs two thread switches to resume.
type table[T any] struct {
	kind   kind
	shards [tableShards]tableShard[T]
}

const tableShards = 16

type tableShard[T any] struct {
	mu sync.Mutex // not RWMutex: lookups are rare next to adds and takes
	m  map[uint64]T
	_  [32]byte // a shard per cache line
}

func newTable[T any](k kind) *table[T] {
	t := &table[T]{kind: k}
	for i := range t.shards {
		t.shards[i].init()
	}
	return t
}

// shard is where id lives; consecutive ids go to consecutive shards.
func (t *table[T]) shard(id uint64) *tableShard[T] { return &t.shards[(id>>8)%tableShards] }

func (t *table[T]) add(id uint64, v T) { t.shard(id).put(id, v) }

// get returns the object of a live handle, or an INVALID_HANDLE error that
// says what is wrong with it.
func (t *table[T]) get(id uint64) (T, error) {
	v, ok := t.shard(id).get(id)
	if !ok {
		return v, t.invalid(id)
	}
	return v, nil
}

// take removes a live handle and returns its object; only one caller can
// take a given handle, which makes release and completion exactly-once.
func (t *table[T]) take(id uint64) (T, error) { return t.takeUnless(id, nil) }

// takeUnless is take, except that an object for which refuse (if not nil)
// returns an error stays, and that error is returned.
func (t *table[T]) takeUnless(id uint64, refuse func(T) error) (T, error) {
	v, ok, err := t.shard(id).takeUnless(id, refuse)
	switch {
	case err != nil:
		return v, err
	case !ok:
		return v, t.invalid(id)
	}
	return v, nil
}

func (sh *tableShard[T]) init() { sh.m = make(map[uint64]T) }

func (sh *tableShard[T]) put(id uint64, v T) {
	sh.mu.Lock()
	sh.m[id] = v
	sh.mu.Unlock()
}

func (sh *tableShard[T]) get(id uint64) (T, bool) {
	sh.mu.Lock()
	v, ok := sh.m[id]
	sh.mu.Unlock()
	return v, ok
}

// takeUnless removes id's entry, if it is there (ok) and refuse (if not
// nil) accepts it; refuse's error leaves the entry.
func (sh *tableShard[T]) takeUnless(id uint64, refuse func(T) error) (v T, ok bool, err error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v, ok = sh.m[id]
	if !ok {
		return v, false, nil
	}
	if refuse != nil {
		if err := refuse(v); err != nil {
			return v, true, err
		}
	}
	delete(sh.m, id)
	return v, true, nil
}

func (t *table[T]) invalid(id uint64) error { return invalidHandle(t.kind, id) }

// invalidHandle is the INVALID_HANDLE error for id, which is not a live
// handle of kind want.
func invalidHandle(want kind, id uint64) error {
	switch k := kind(id & 0xff); {
	case id == 0:
		return errorf(C.PROSODY_ERR_INVALID_HANDLE, "invalid %s handle 0", want)
	case k != want:
		return errorf(C.PROSODY_ERR_INVALID_HANDLE, "handle %#x is of kind %s, not %s", id, k, want)
	}
	return errorf(C.PROSODY_ERR_INVALID_HANDLE, "unknown or released %s handle %#x", want, id)
}

// owned are the handles a client's host opened on the client or on its
// events (state handles, cursors, readers): releasing the client releases
// them. Each is recorded with its release, which takes it from its table,
// so that it runs once however the host's own release races it.
type owned struct {
	mu       sync.Mutex
	released bool
	ids      map[uint64]func()
}

// adopt records id and its release; false once the client was released
// (the caller then takes the handle back and fails).
func (o *owned) adopt(id uint64, release func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.released {
		return false
	}
	if o.ids == nil {
		o.ids = make(map[uint64]func())
	}
	o.ids[id] = release
	return true
}

// forget drops id, which the host released itself.
func (o *owned) forget(id uint64) {
	o.mu.Lock()
	delete(o.ids, id)
	o.mu.Unlock()
}

// releaseAll releases every handle adopted, and refuses later ones.
func (o *owned) releaseAll() {
	o.mu.Lock()
	o.released = true
	ids := o.ids
	o.ids = nil
	o.mu.Unlock()
	for _, release := range ids {
		release()
	}
}
