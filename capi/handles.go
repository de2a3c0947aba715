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
)

func (k kind) String() string {
	switch k {
	case kindClient:
		return "client"
	case kindAdmin:
		return "admin"
	case kindEvent:
		return "event"
	}
	return fmt.Sprintf("unknown-kind(%d)", uint8(k))
}

// lastID counts handles; ids are never reused within a process (2^56 ids
// is more than any process can make).
var lastID atomic.Uint64

func newID(k kind) uint64 { return lastID.Add(1)<<8 | uint64(k) }

// table maps handles of one kind to their objects.
type table[T any] struct {
	kind kind
	mu   sync.RWMutex
	m    map[uint64]T
}

func newTable[T any](k kind) *table[T] { return &table[T]{kind: k, m: make(map[uint64]T)} }

func (t *table[T]) add(id uint64, v T) {
	t.mu.Lock()
	t.m[id] = v
	t.mu.Unlock()
}

// get returns the object of a live handle, or an INVALID_HANDLE error that
// says what is wrong with it.
func (t *table[T]) get(id uint64) (T, error) {
	t.mu.RLock()
	v, ok := t.m[id]
	t.mu.RUnlock()
	if !ok {
		return v, t.invalid(id)
	}
	return v, nil
}

// take removes a live handle and returns its object; only one caller can
// take a given handle, which makes release and completion exactly-once.
func (t *table[T]) take(id uint64) (T, error) {
	t.mu.Lock()
	v, ok := t.m[id]
	delete(t.m, id)
	t.mu.Unlock()
	if !ok {
		return v, t.invalid(id)
	}
	return v, nil
}

func (t *table[T]) invalid(id uint64) error {
	switch k := kind(id & 0xff); {
	case id == 0:
		return errorf(C.PROSODY_ERR_INVALID_HANDLE, "invalid %s handle 0", t.kind)
	case k != t.kind:
		return errorf(C.PROSODY_ERR_INVALID_HANDLE, "handle %#x is of kind %s, not %s", id, k, t.kind)
	}
	return errorf(C.PROSODY_ERR_INVALID_HANDLE, "unknown or released %s handle %#x", t.kind, id)
}

// takeWhere removes and returns every object for which match is true.
func (t *table[T]) takeWhere(match func(T) bool) []T {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []T
	for id, v := range t.m {
		if match(v) {
			out = append(out, v)
			delete(t.m, id)
		}
	}
	return out
}

// each calls f for every entry, under the read lock: f must be quick and
// must not touch the table.
func (t *table[T]) each(f func(T)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, v := range t.m {
		f(v)
	}
}
