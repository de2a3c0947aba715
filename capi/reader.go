package main

/*
#include "shims.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/state"
)

// Published-state readers (prosody_client_reader and the operations on a
// reader). Opening one checks its arguments only: the core's reader is
// made by the first operation, on a goroutine, because outside mock mode
// the client's first reader connects to Cassandra (and the first read
// fetches the routing record). A reader's reads are independent of each
// other and run concurrently, each on a goroutine of its own; a scan's
// cursor has a queue of its own, its scan opened first on it, so that its
// chunks report in order.
//
// Every operation of a reader runs with the reader's context, cancelled
// when its client is released: a read still waiting on the store then
// fails with CLOSED.

var readers = newTable[*readerEntry](kindReader)

// readerEntry is what a reader handle names.
type readerEntry struct {
	owner     *dispatcher
	c         *client.Client
	subsystem string
	name      string
	kind      C.int
	ttl       config.Optional[time.Duration]

	ctx    context.Context // cancelled, with errReleased, when the client is released
	cancel context.CancelCauseFunc

	mu sync.Mutex
	r  *state.Reader // made by the first operation
}

func (e *readerEntry) client() *dispatcher { return e.owner }

// cause says why the reader's context was cancelled (nil while it is not).
func (e *readerEntry) cause() error { return context.Cause(e.ctx) }

// reader returns the core's reader, making it first: a failure (the client
// is closed, Cassandra cannot be reached) is reported by this operation,
// and the next one tries again.
func (e *readerEntry) reader() (*state.Reader, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.r == nil {
		r, err := e.c.Reader(e.subsystem, e.name, collectionKind(e.kind), e.ttl)
		if err != nil {
			return nil, err
		}
		e.r = r
	}
	return e.r, nil
}

// collectionKind is the core's name of a PROSODY_STATE_* kind.
func collectionKind(k C.int) config.CollectionKind {
	switch k {
	case C.PROSODY_STATE_VALUE:
		return config.CollectionValue
	case C.PROSODY_STATE_MAP:
		return config.CollectionMap
	}
	return config.CollectionDeque
}

// cacheTTL is a reader's cache window: < 0 the client's, 0 none, > 0 that
// many milliseconds.
func cacheTTL(ms int64) config.Optional[time.Duration] {
	if ms < 0 {
		return config.None[time.Duration]()
	}
	return config.Some(time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond)
}

// requiredName copies a name that must not be empty.
func requiredName(fn, what string, p *C.char, n C.size_t) (string, error) {
	s, err := goBytes(fn, what, unsafe.Pointer(p), n)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: %s must not be empty", fn, what)
	}
	return s, nil
}

// userKey copies the user key a reader's operation names.
func userKey(fn string, p *C.char, n C.size_t) (string, error) {
	if p == nil {
		return "", nullArg(fn, "key")
	}
	return stateKey(fn, "key", p, n)
}

// readerOp builds op for e, of user key key, copying the arguments it
// takes.
func (e *readerEntry) readerOp(fn string, op C.int, key string, a *stateArgs) (stateRun, error) {
	spec, err := stateOpOf(fn, op, e.kind, e.name, true)
	if err != nil {
		return nil, err
	}
	ctx := e.ctx
	with := func(f func(r *state.Reader) (stateResult, error)) stateRun {
		return func() (stateResult, error) {
			r, err := e.reader()
			if err != nil {
				return stateResult{}, err
			}
			return f(r)
		}
	}
	item := func(f func(r *state.Reader) ([]byte, bool, error)) stateRun {
		return with(func(r *state.Reader) (stateResult, error) {
			v, ok, err := f(r)
			return oneItem("", false, v, ok), err
		})
	}
	switch e.kind {
	case C.PROSODY_STATE_VALUE: // PROSODY_STATE_GET
		return item(func(r *state.Reader) ([]byte, bool, error) { return r.Value(ctx, key) }), nil
	case C.PROSODY_STATE_MAP:
		if op == C.PROSODY_STATE_GET_MANY {
			keys, err := a.manyKeys(fn)
			if err != nil {
				return nil, err
			}
			return with(func(r *state.Reader) (stateResult, error) {
				got, err := r.MapGet(ctx, key, keys)
				if err != nil {
					return stateResult{}, err
				}
				return manyResult(keys, got), nil
			}), nil
		}
		mk, err := a.mapKey(fn, spec)
		if err != nil {
			return nil, err
		}
		return with(func(r *state.Reader) (stateResult, error) {
			got, err := r.MapGet(ctx, key, []string{mk})
			if err != nil {
				return stateResult{}, err
			}
			if op == C.PROSODY_STATE_CONTAINS {
				return stateResult{number: boolNumber(got[0] != nil)}, nil
			}
			return oneItem(mk, true, got[0], got[0] != nil), nil
		}), nil
	}
	switch op {
	case C.PROSODY_STATE_GET:
		index := a.index
		return item(func(r *state.Reader) ([]byte, bool, error) { return r.DequeGet(ctx, key, index) }), nil
	case C.PROSODY_STATE_PEEK_FRONT:
		return item(func(r *state.Reader) ([]byte, bool, error) { return r.PeekFront(ctx, key) }), nil
	case C.PROSODY_STATE_PEEK_BACK:
		return item(func(r *state.Reader) ([]byte, bool, error) { return r.PeekBack(ctx, key) }), nil
	}
	// PROSODY_STATE_LEN, PROSODY_STATE_IS_EMPTY
	return with(func(r *state.Reader) (stateResult, error) {
		n, err := r.Len(ctx, key)
		if op == C.PROSODY_STATE_IS_EMPTY {
			return stateResult{number: boolNumber(n == 0)}, err
		}
		return stateResult{number: n}, err
	}), nil
}

//export prosodyGo_client_reader
func prosodyGo_client_reader(id C.uint64_t, subsystem *C.char, subsystemLen C.size_t, name *C.char, nameLen C.size_t,
	k C.int, ttlMs C.int64_t, out *C.uint64_t, errOut **C.char) (status C.int) {
	const fn = "prosody_client_reader"
	defer guard(fn, &status, errOut)
	if out == nil {
		return fail(errOut, nullArg(fn, "reader"))
	}
	sub, err := requiredName(fn, "subsystem", subsystem, subsystemLen)
	if err != nil {
		return fail(errOut, err)
	}
	n, err := requiredName(fn, "name", name, nameLen)
	if err != nil {
		return fail(errOut, err)
	}
	if err := checkStateKind(fn, k); err != nil {
		return fail(errOut, err)
	}
	e, err := clients.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	re := &readerEntry{owner: e.disp, c: e.c, subsystem: sub, name: n, kind: k, ttl: cacheTTL(int64(ttlMs)), ctx: ctx,
		cancel: cancel}
	rid, err := addOwned(fn, readers, kindReader, e.disp, re, func(re *readerEntry) { re.cancel(errReleased) })
	if err != nil {
		cancel(nil)
		return fail(errOut, err)
	}
	*out = C.uint64_t(rid)
	return C.PROSODY_OK
}

//export prosodyGo_reader_call
func prosodyGo_reader_call(id C.uint64_t, key *C.char, keyLen C.size_t, op C.int, args *C.prosody_state_args,
	cb C.prosody_state_fn, ud C.uintptr_t, errOut **C.char) (status C.int) {
	const fn = "prosody_reader_call"
	defer guard(fn, &status, errOut)
	rep, err := newStateReport(fn, cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	a, err := stateArgsOf(fn, args)
	if err != nil {
		return fail(errOut, err)
	}
	k, err := userKey(fn, key, keyLen)
	if err != nil {
		return fail(errOut, err)
	}
	e, err := readers.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	run, err := e.readerOp(fn, op, k, &a)
	if err != nil {
		return fail(errOut, err)
	}
	go rep.run(fn, e.cause, run)
	return C.PROSODY_OK
}

//export prosodyGo_reader_scan
func prosodyGo_reader_scan(id C.uint64_t, key *C.char, keyLen C.size_t, direction, keysOnly C.int, out *C.uint64_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_reader_scan"
	defer guard(fn, &status, errOut)
	if out == nil {
		return fail(errOut, nullArg(fn, "cursor"))
	}
	dir, err := scanDirection(fn, direction)
	if err != nil {
		return fail(errOut, err)
	}
	k, err := userKey(fn, key, keyLen)
	if err != nil {
		return fail(errOut, err)
	}
	e, err := readers.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	if e.kind == C.PROSODY_STATE_VALUE {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
			"%s: collection %q is a value: only maps and deques can be scanned", fn, e.name))
	}
	c := &cursorEntry{owner: e.owner, ops: new(opQueue), cause: e.cause, keyed: e.kind == C.PROSODY_STATE_MAP}
	cid, err := openCursor(fn, c, func() (*state.Cursor, error) {
		r, err := e.reader()
		if err != nil {
			return nil, err
		}
		return r.Scan(e.ctx, k, dir, keysOnly != 0)
	})
	if err != nil {
		return fail(errOut, err)
	}
	*out = C.uint64_t(cid)
	return C.PROSODY_OK
}

//export prosodyGo_reader_release
func prosodyGo_reader_release(id C.uint64_t, errOut **C.char) (status C.int) {
	const fn = "prosody_reader_release"
	defer guard(fn, &status, errOut)
	// Its reads still running finish and report; its cursors stay usable
	// until released.
	return releaseOwned(fn, readers, id, errOut, func(*readerEntry) {})
}
