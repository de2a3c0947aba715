package main

/*
#include "shims.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/state"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// Keyed state of an event (prosody_event_state and the operations on its
// state handles and cursors). Opening a collection does no I/O, so its
// status is decided at once. Every operation checks its arguments and the
// handle at once, then runs on the handle's queue (an opQueue, shared with
// the handle's cursors), so the operations of one state handle run and
// report in the order the host called them; the core serialises those of
// one attempt anyway (state.Txn).
//
// A state handle keeps what its operations need (the core's handle, the
// event's *event.Context and its queue), never the event itself: once the
// host completed the event the core refuses the handle's operations
// (state.ErrExpired, TRANSIENT), and the handle stays valid as a handle
// until the host releases it, or its client is released.

var (
	states  = newTable[*stateEntry](kindState)
	cursors = newTable[*cursorEntry](kindCursor)
)

// stateEntry is what a state handle names: one collection opened for one
// event's attempt.
type stateEntry struct {
	kind  C.int // PROSODY_STATE_VALUE, _MAP or _DEQUE
	name  string
	owner *dispatcher    // the event's client's
	ctx   *event.Context // the event's, for the cause of a cancellation
	ops   *opQueue
	// openErr is why the collection could not be opened for the event
	// (its attempt had ended, or was cancelled): every operation reports
	// it, with the status of its class.
	openErr error
	// The core's handle: the one of the kind, unless openErr is set.
	value *state.Value
	m     *state.Map
	dq    *state.Deque
}

// cursorEntry is what a cursor handle names: a scan of a map or deque.
type cursorEntry struct {
	owner *dispatcher
	ops   *opQueue     // its state handle's, or its own (a reader's)
	cause func() error // why its context was cancelled (see stateError)
	keyed bool         // map entries: items carry their keys
	// Set by the scan's opening, the first function on ops; read by the
	// functions after it on ops, which run one at a time.
	cur *state.Cursor
	err error // the scan could not be opened: every chunk reports it
}

// close ends the scan after the chunks asked for before; the handle is
// already gone from the table.
func (c *cursorEntry) close() {
	c.ops.enqueue(func() {
		defer func() {
			if r := recover(); r != nil {
				_ = internalError("prosody_cursor_release", r)
			}
		}()
		if c.cur != nil {
			c.cur.Close()
		}
	})
}

// addOwned registers v under a new handle of kind k, released with the
// client of owner.
func addOwned[T any](fn string, t *table[T], k kind, owner *dispatcher, v T, release func(T)) (uint64, error) {
	id := newID(k)
	t.add(id, v)
	if !owner.owned.adopt(id, func() {
		if v, err := t.take(id); err == nil {
			release(v)
		}
	}) {
		_, _ = t.take(id)
		return 0, errorf(C.PROSODY_ERR_INVALID_HANDLE, "%s: the client was released", fn)
	}
	return id, nil
}

// ownedEntry is an object of a handle a client owns.
type ownedEntry interface {
	client() *dispatcher
}

func (s *stateEntry) client() *dispatcher  { return s.owner }
func (c *cursorEntry) client() *dispatcher { return c.owner }

// releaseOwned is the host's release of a handle its client owns.
func releaseOwned[T ownedEntry](fn string, t *table[T], id C.uint64_t, errOut **C.char, release func(T)) C.int {
	v, err := t.take(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	v.client().owned.forget(uint64(id))
	release(v)
	return C.PROSODY_OK
}

// stateError gives an operation's error the status the header lists:
// NULL_VALUE for a write of JSON null; TRANSIENT for the other transient
// classes, for a handle used after its event ended, and by default;
// PERMANENT and TERMINAL by class; CLOSED when the client was released
// during a reader's operation. A context error from the store means the
// context of the operation (the event's, or the reader's) was cancelled or
// invalidated meanwhile: cause (nil: none) says why.
func stateError(fn string, cause func() error, err error) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	if cause != nil && fault.IsCancellation(err) {
		if c := cause(); c != nil {
			err = c
		}
	}
	if errors.Is(err, event.ErrInvalidContext) {
		err = state.ErrExpired // the event ended while the operation ran
	}
	status := C.int(C.PROSODY_ERR_TRANSIENT)
	switch {
	case errors.Is(err, state.ErrNullValue):
		status = C.PROSODY_ERR_NULL_VALUE
	case errors.Is(err, errReleased), errors.Is(err, client.ErrClosed):
		status = C.PROSODY_ERR_CLOSED
	case fault.ClassOf(err) == fault.ClassPermanent:
		status = C.PROSODY_ERR_PERMANENT
	case fault.ClassOf(err) == fault.ClassTerminal:
		status = C.PROSODY_ERR_TERMINAL
	}
	return &apiError{status: status, msg: fn + ": " + err.Error()}
}

// Collection kinds, as bits of a set.
func kindBit(k C.int) uint8 { return 1 << uint(k) }

const (
	kV = 1 << C.PROSODY_STATE_VALUE
	kM = 1 << C.PROSODY_STATE_MAP
	kD = 1 << C.PROSODY_STATE_DEQUE
)

func stateKindName(k C.int) string {
	switch k {
	case C.PROSODY_STATE_VALUE:
		return "value"
	case C.PROSODY_STATE_MAP:
		return "map"
	case C.PROSODY_STATE_DEQUE:
		return "deque"
	}
	return fmt.Sprintf("kind %d", int(k))
}

func checkStateKind(fn string, k C.int) error {
	switch k {
	case C.PROSODY_STATE_VALUE, C.PROSODY_STATE_MAP, C.PROSODY_STATE_DEQUE:
		return nil
	}
	return errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
		"%s: kind %d: must be PROSODY_STATE_VALUE (1), PROSODY_STATE_MAP (2) or PROSODY_STATE_DEQUE (3)", fn, int(k))
}

// stateOpSpec says which kinds take an operation, and whether a reader
// may run it.
type stateOpSpec struct {
	name  string
	kinds uint8
	read  bool
}

var stateOps = map[C.int]stateOpSpec{
	C.PROSODY_STATE_GET:        {"PROSODY_STATE_GET", kV | kM | kD, true},
	C.PROSODY_STATE_SET:        {"PROSODY_STATE_SET", kV | kM, false},
	C.PROSODY_STATE_CLEAR:      {"PROSODY_STATE_CLEAR", kV | kM | kD, false},
	C.PROSODY_STATE_COMMIT:     {"PROSODY_STATE_COMMIT", kV | kM | kD, false},
	C.PROSODY_STATE_ROLLBACK:   {"PROSODY_STATE_ROLLBACK", kV | kM | kD, false},
	C.PROSODY_STATE_CONTAINS:   {"PROSODY_STATE_CONTAINS", kM, true},
	C.PROSODY_STATE_GET_MANY:   {"PROSODY_STATE_GET_MANY", kM, true},
	C.PROSODY_STATE_REMOVE:     {"PROSODY_STATE_REMOVE", kM, false},
	C.PROSODY_STATE_PUSH_BACK:  {"PROSODY_STATE_PUSH_BACK", kD, false},
	C.PROSODY_STATE_PUSH_FRONT: {"PROSODY_STATE_PUSH_FRONT", kD, false},
	C.PROSODY_STATE_POP_BACK:   {"PROSODY_STATE_POP_BACK", kD, false},
	C.PROSODY_STATE_POP_FRONT:  {"PROSODY_STATE_POP_FRONT", kD, false},
	C.PROSODY_STATE_PEEK_BACK:  {"PROSODY_STATE_PEEK_BACK", kD, true},
	C.PROSODY_STATE_PEEK_FRONT: {"PROSODY_STATE_PEEK_FRONT", kD, true},
	C.PROSODY_STATE_LEN:        {"PROSODY_STATE_LEN", kD, true},
	C.PROSODY_STATE_IS_EMPTY:   {"PROSODY_STATE_IS_EMPTY", kD, true},
}

// stateOpOf checks that op is an operation of kind (and one a reader may
// run, for a reader).
func stateOpOf(fn string, op, kind C.int, name string, reader bool) (stateOpSpec, error) {
	spec, ok := stateOps[op]
	if !ok {
		return spec, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: unknown operation %d (see PROSODY_STATE_GET and after)", fn, int(op))
	}
	if spec.kinds&kindBit(kind) == 0 {
		return spec, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: %s is not an operation of a %s (collection %q)",
			fn, spec.name, stateKindName(kind), name)
	}
	if reader && !spec.read {
		return spec, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
			"%s: %s is not a read: a reader runs PROSODY_STATE_GET, _CONTAINS, _GET_MANY, _LEN, _IS_EMPTY, _PEEK_FRONT and _PEEK_BACK",
			fn, spec.name)
	}
	return spec, nil
}

// stateArgs are the fields of the host's prosody_state_args that its size
// covers; the rest count as zero.
type stateArgs struct {
	key      *C.char
	keyLen   C.size_t
	value    *C.uint8_t
	valueLen C.size_t
	keys     *C.prosody_state_item
	keysLen  C.size_t
	index    uint64
}

func stateArgsOf(fn string, p *C.prosody_state_args) (stateArgs, error) {
	var a stateArgs
	if p == nil {
		return a, nullArg(fn, "args")
	}
	if p.size < C.size_t(unsafe.Sizeof(p.size)) {
		return a, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
			"%s: args->size is %d: set it to sizeof(prosody_state_args)", fn, uint64(p.size))
	}
	if hasField(p.size, unsafe.Offsetof(p.key_len)+unsafe.Sizeof(p.key_len)) {
		a.key, a.keyLen = p.key, p.key_len
	}
	if hasField(p.size, unsafe.Offsetof(p.value_len)+unsafe.Sizeof(p.value_len)) {
		a.value, a.valueLen = p.value, p.value_len
	}
	if hasField(p.size, unsafe.Offsetof(p.keys_len)+unsafe.Sizeof(p.keys_len)) {
		a.keys, a.keysLen = p.keys, p.keys_len
	}
	if hasField(p.size, unsafe.Offsetof(p.index)+unsafe.Sizeof(p.index)) {
		a.index = uint64(p.index)
	}
	return a, nil
}

// stateKey copies a map key (or a reader's user key): UTF-8, any byte
// count, NULL only when missing.
func stateKey(fn, what string, p *C.char, n C.size_t) (string, error) {
	k, err := goBytes(fn, what, unsafe.Pointer(p), n)
	if err != nil {
		return "", err
	}
	if !utf8.ValidString(k) {
		return "", errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: %s %q: must be valid UTF-8", fn, what, k)
	}
	return k, nil
}

// mapKey is the key an operation of a map takes.
func (a *stateArgs) mapKey(fn string, spec stateOpSpec) (string, error) {
	if a.key == nil {
		return "", errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: %s of a map takes a key: args->key must not be NULL",
			fn, spec.name)
	}
	return stateKey(fn, "args->key", a.key, a.keyLen)
}

// item is the item a write takes, copied.
func (a *stateArgs) item(fn string, spec stateOpSpec) ([]byte, error) {
	if a.value == nil {
		return nil, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: %s takes a value: args->value must not be NULL",
			fn, spec.name)
	}
	return append([]byte{}, unsafe.Slice((*byte)(unsafe.Pointer(a.value)), a.valueLen)...), nil
}

// manyKeys are the keys of PROSODY_STATE_GET_MANY, copied.
func (a *stateArgs) manyKeys(fn string) ([]string, error) {
	if a.keysLen == 0 {
		return nil, nil
	}
	if a.keys == nil {
		return nil, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: args->keys is NULL but args->keys_len is %d",
			fn, uint64(a.keysLen))
	}
	items := unsafe.Slice(a.keys, a.keysLen)
	keys := make([]string, len(items))
	for i := range items {
		what := fmt.Sprintf("args->keys[%d].key", i)
		if items[i].key == nil {
			return nil, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: %s must not be NULL", fn, what)
		}
		k, err := stateKey(fn, what, items[i].key, items[i].key_len)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

// stateResult is what an operation reports: items and a number.
type stateResult struct {
	items  []state.Item
	keyed  bool // map entries: the items carry their keys
	number uint64
}

// stateRun is an operation, run on its handle's queue.
type stateRun func() (stateResult, error)

// oneItem is the result of a read of one item.
func oneItem(key string, keyed bool, item []byte, ok bool) stateResult {
	if !ok {
		return stateResult{}
	}
	return stateResult{items: []state.Item{{Key: key, Value: item}}, keyed: keyed}
}

func boolNumber(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// written is the result of an operation that reports nothing.
func written(err error) (stateResult, error) { return stateResult{}, err }

// settler is what every collection handle does: Commit and Rollback.
type settler interface {
	Commit() error
	Rollback() error
}

// operation builds op for s, copying the arguments it takes.
func (s *stateEntry) operation(fn string, op C.int, a *stateArgs) (stateRun, error) {
	spec, err := stateOpOf(fn, op, s.kind, s.name, false)
	if err != nil {
		return nil, err
	}
	var h settler
	switch s.kind {
	case C.PROSODY_STATE_VALUE:
		h = s.value
	case C.PROSODY_STATE_MAP:
		h = s.m
	default:
		h = s.dq
	}
	var run stateRun
	switch op {
	case C.PROSODY_STATE_COMMIT:
		run = func() (stateResult, error) { return written(h.Commit()) }
	case C.PROSODY_STATE_ROLLBACK:
		run = func() (stateResult, error) { return written(h.Rollback()) }
	default:
		switch s.kind {
		case C.PROSODY_STATE_VALUE:
			run, err = s.valueOp(fn, op, spec, a)
		case C.PROSODY_STATE_MAP:
			run, err = s.mapOp(fn, op, spec, a)
		default:
			run, err = s.dequeOp(fn, op, spec, a)
		}
		if err != nil {
			return nil, err
		}
	}
	if openErr := s.openErr; openErr != nil {
		return func() (stateResult, error) { return stateResult{}, openErr }, nil
	}
	return run, nil
}

func (s *stateEntry) valueOp(fn string, op C.int, spec stateOpSpec, a *stateArgs) (stateRun, error) {
	v := s.value
	switch op {
	case C.PROSODY_STATE_GET:
		return func() (stateResult, error) {
			item, ok, err := v.Get()
			return oneItem("", false, item, ok), err
		}, nil
	case C.PROSODY_STATE_SET:
		item, err := a.item(fn, spec)
		if err != nil {
			return nil, err
		}
		return func() (stateResult, error) { return written(v.Set(item)) }, nil
	default: // PROSODY_STATE_CLEAR
		return func() (stateResult, error) { return written(v.Clear()) }, nil
	}
}

func (s *stateEntry) mapOp(fn string, op C.int, spec stateOpSpec, a *stateArgs) (stateRun, error) {
	m := s.m
	switch op {
	case C.PROSODY_STATE_CLEAR:
		return func() (stateResult, error) { return written(m.Clear()) }, nil
	case C.PROSODY_STATE_GET_MANY:
		keys, err := a.manyKeys(fn)
		if err != nil {
			return nil, err
		}
		return func() (stateResult, error) {
			got, err := m.GetMany(keys)
			if err != nil {
				return stateResult{}, err
			}
			return manyResult(keys, got), nil
		}, nil
	}
	key, err := a.mapKey(fn, spec)
	if err != nil {
		return nil, err
	}
	switch op {
	case C.PROSODY_STATE_GET:
		return func() (stateResult, error) {
			item, ok, err := m.Get(key)
			return oneItem(key, true, item, ok), err
		}, nil
	case C.PROSODY_STATE_CONTAINS:
		return func() (stateResult, error) {
			ok, err := m.Contains(key)
			return stateResult{number: boolNumber(ok)}, err
		}, nil
	case C.PROSODY_STATE_REMOVE:
		return func() (stateResult, error) { return written(m.Remove(key)) }, nil
	default: // PROSODY_STATE_SET
		item, err := a.item(fn, spec)
		if err != nil {
			return nil, err
		}
		return func() (stateResult, error) { return written(m.Set(key, item)) }, nil
	}
}

// manyResult is GET_MANY's result: item i for keys[i], its value NULL
// where absent.
func manyResult(keys []string, got [][]byte) stateResult {
	items := make([]state.Item, len(keys))
	for i, k := range keys {
		items[i] = state.Item{Key: k, Value: got[i]}
	}
	return stateResult{items: items, keyed: true}
}

func (s *stateEntry) dequeOp(fn string, op C.int, spec stateOpSpec, a *stateArgs) (stateRun, error) {
	d := s.dq
	end := func(f func() ([]byte, bool, error)) stateRun {
		return func() (stateResult, error) {
			item, ok, err := f()
			return oneItem("", false, item, ok), err
		}
	}
	switch op {
	case C.PROSODY_STATE_GET:
		index := a.index
		return end(func() ([]byte, bool, error) { return d.Get(index) }), nil
	case C.PROSODY_STATE_CLEAR:
		return func() (stateResult, error) { return written(d.Clear()) }, nil
	case C.PROSODY_STATE_PUSH_BACK, C.PROSODY_STATE_PUSH_FRONT:
		item, err := a.item(fn, spec)
		if err != nil {
			return nil, err
		}
		push := d.PushFront
		if op == C.PROSODY_STATE_PUSH_BACK {
			push = d.PushBack
		}
		return func() (stateResult, error) { return written(push(item)) }, nil
	case C.PROSODY_STATE_POP_BACK:
		return end(d.PopBack), nil
	case C.PROSODY_STATE_POP_FRONT:
		return end(d.PopFront), nil
	case C.PROSODY_STATE_PEEK_BACK:
		return end(d.PeekBack), nil
	case C.PROSODY_STATE_PEEK_FRONT:
		return end(d.PeekFront), nil
	case C.PROSODY_STATE_LEN:
		return func() (stateResult, error) {
			n, err := d.Len()
			return stateResult{number: n}, err
		}, nil
	default: // PROSODY_STATE_IS_EMPTY
		return func() (stateResult, error) {
			empty, err := d.IsEmpty()
			return stateResult{number: boolNumber(empty)}, err
		}, nil
	}
}

// stateReport is the host's prosody_state_fn for one operation.
type stateReport struct {
	fn C.prosody_state_fn
	ud C.uintptr_t
}

func newStateReport(fn string, cb C.prosody_state_fn, ud C.uintptr_t) (stateReport, error) {
	if cb == nil {
		return stateReport{}, nullArg(fn, "cb")
	}
	return stateReport{fn: cb, ud: ud}, nil
}

// runOn runs op on q and reports its result or its failure (with the
// status stateError gives it, cause saying why a context was cancelled),
// exactly once.
func (r stateReport) runOn(fn string, q *opQueue, cause func() error, op stateRun) {
	q.enqueue(func() { r.run(fn, cause, op) })
}

// run runs op and reports.
func (r stateReport) run(fn string, cause func() error, op stateRun) {
	var res stateResult
	var err error
	defer func() {
		if rec := recover(); rec != nil {
			res, err = stateResult{}, internalError(fn, rec)
		}
		r.call(res, err)
	}()
	res, err = op()
	err = stateError(fn, cause, err)
}

// call reports a result (or err) to the host. The items and their bytes
// are one C allocation, freed when the callback returns, as is the
// message.
func (r stateReport) call(res stateResult, err error) {
	var msg *C.char
	if err != nil {
		msg = C.CString(err.Error())
		defer C.free(unsafe.Pointer(msg))
		res = stateResult{}
	}
	buf, items := cItems(res.items, res.keyed)
	defer C.free(buf)
	C.prosodyInt_call_state(r.fn, r.ud, statusOf(err), items, C.size_t(len(res.items)), C.uint64_t(res.number), msg)
}

// cItems lays items out in one C allocation: the prosody_state_item array,
// then their bytes. Keyed items (map entries) always have a key pointer,
// the empty key included; the others have key NULL. A nil value (absent,
// or left out by a keys-only scan) is NULL with length 0.
func cItems(items []state.Item, keyed bool) (unsafe.Pointer, *C.prosody_state_item) {
	if len(items) == 0 {
		return nil, nil
	}
	head := uintptr(len(items)) * unsafe.Sizeof(C.prosody_state_item{})
	size := head
	for _, it := range items {
		if keyed {
			size += uintptr(len(it.Key))
		}
		size += uintptr(len(it.Value))
	}
	buf := C.malloc(C.size_t(size + 1)) // + 1: an empty key at the end points inside
	arr := unsafe.Slice((*C.prosody_state_item)(buf), len(items))
	data := unsafe.Slice((*byte)(buf), size)
	off := head
	for i, it := range items {
		var e C.prosody_state_item
		if keyed {
			e.key, e.key_len = (*C.char)(unsafe.Add(buf, off)), C.size_t(len(it.Key))
			off += uintptr(copy(data[off:], it.Key))
		}
		if it.Value != nil {
			e.value, e.value_len = (*C.uint8_t)(unsafe.Add(buf, off)), C.size_t(len(it.Value))
			off += uintptr(copy(data[off:], it.Value))
		}
		arr[i] = e
	}
	return buf, &arr[0]
}

// scanDirection checks a scan's direction.
func scanDirection(fn string, d C.int) (statestore.Direction, error) {
	switch d {
	case C.PROSODY_STATE_FORWARD:
		return statestore.Forward, nil
	case C.PROSODY_STATE_BACKWARD:
		return statestore.Backward, nil
	}
	return 0, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
		"%s: direction %d: must be PROSODY_STATE_FORWARD (0, forward) or PROSODY_STATE_BACKWARD (1, backward)", fn, int(d))
}

// openCursor registers a cursor whose scan open (run first on ops) opens.
func openCursor(fn string, c *cursorEntry, open func() (*state.Cursor, error)) (uint64, error) {
	id, err := addOwned(fn, cursors, kindCursor, c.owner, c, (*cursorEntry).close)
	if err != nil {
		return 0, err
	}
	c.ops.enqueue(func() {
		defer func() {
			if r := recover(); r != nil {
				c.cur, c.err = nil, internalError(fn, r)
			}
		}()
		c.cur, c.err = open()
	})
	return id, nil
}

// next reads the cursor's next chunk. Run on c.ops.
func (c *cursorEntry) next() (stateResult, error) {
	if c.err != nil {
		return stateResult{}, c.err
	}
	items, err := c.cur.Next()
	return stateResult{items: items, keyed: c.keyed}, err
}

//export prosodyGo_event_state
func prosodyGo_event_state(id C.uint64_t, name *C.char, nameLen C.size_t, k C.int, out *C.uint64_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_event_state"
	defer guard(fn, &status, errOut)
	if out == nil {
		return fail(errOut, nullArg(fn, "state"))
	}
	if err := checkStateKind(fn, k); err != nil {
		return fail(errOut, err)
	}
	n, err := goBytes(fn, "name", unsafe.Pointer(name), nameLen)
	if err != nil {
		return fail(errOut, err)
	}
	ev, err := eventFor(fn, id)
	if err != nil {
		return fail(errOut, err)
	}
	s := &stateEntry{kind: k, name: n, ctx: ev.ctx, ops: new(opQueue), owner: ev.disp}
	switch k {
	case C.PROSODY_STATE_VALUE:
		s.value, err = state.ValueOf(ev.ctx, n)
	case C.PROSODY_STATE_MAP:
		s.m, err = state.MapOf(ev.ctx, n)
	default:
		s.dq, err = state.DequeOf(ev.ctx, n)
	}
	switch {
	case err == nil:
	case errors.Is(err, state.ErrNoState):
		return fail(errOut, errorf(C.PROSODY_ERR_STATE, "%s: %v: the client has no state_collections", fn, err))
	case errors.Is(err, state.ErrUnregistered):
		return fail(errOut, errorf(C.PROSODY_ERR_PERMANENT, "%s: %v", fn, err))
	default:
		// The attempt ended or was cancelled: the handle's operations say
		// so, with the status of the cause, as they would had it happened
		// a moment later.
		s.openErr = err
	}
	sid, err := addOwned(fn, states, kindState, ev.disp, s, func(*stateEntry) {})
	if err != nil {
		return fail(errOut, err)
	}
	*out = C.uint64_t(sid)
	return C.PROSODY_OK
}

//export prosodyGo_state_call
func prosodyGo_state_call(id C.uint64_t, op C.int, args *C.prosody_state_args, cb C.prosody_state_fn, ud C.uintptr_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_state_call"
	defer guard(fn, &status, errOut)
	rep, err := newStateReport(fn, cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	a, err := stateArgsOf(fn, args)
	if err != nil {
		return fail(errOut, err)
	}
	s, err := states.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	run, err := s.operation(fn, op, &a)
	if err != nil {
		return fail(errOut, err)
	}
	rep.runOn(fn, s.ops, s.ctx.Check, run)
	return C.PROSODY_OK
}

//export prosodyGo_state_scan
func prosodyGo_state_scan(id C.uint64_t, direction, keysOnly C.int, out *C.uint64_t, errOut **C.char) (status C.int) {
	const fn = "prosody_state_scan"
	defer guard(fn, &status, errOut)
	if out == nil {
		return fail(errOut, nullArg(fn, "cursor"))
	}
	dir, err := scanDirection(fn, direction)
	if err != nil {
		return fail(errOut, err)
	}
	s, err := states.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	var open func() (*state.Cursor, error)
	switch s.kind {
	case C.PROSODY_STATE_MAP:
		m := s.m
		open = func() (*state.Cursor, error) { return m.Scan(dir, keysOnly != 0) }
	case C.PROSODY_STATE_DEQUE:
		d := s.dq
		open = func() (*state.Cursor, error) { return d.Scan(dir) }
	default:
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
			"%s: collection %q is a value: only maps and deques can be scanned", fn, s.name))
	}
	if openErr := s.openErr; openErr != nil {
		open = func() (*state.Cursor, error) { return nil, openErr }
	}
	c := &cursorEntry{owner: s.owner, ops: s.ops, cause: s.ctx.Check, keyed: s.kind == C.PROSODY_STATE_MAP}
	cid, err := openCursor(fn, c, open)
	if err != nil {
		return fail(errOut, err)
	}
	*out = C.uint64_t(cid)
	return C.PROSODY_OK
}

//export prosodyGo_cursor_next
func prosodyGo_cursor_next(id C.uint64_t, cb C.prosody_state_fn, ud C.uintptr_t, errOut **C.char) (status C.int) {
	const fn = "prosody_cursor_next"
	defer guard(fn, &status, errOut)
	rep, err := newStateReport(fn, cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	c, err := cursors.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	rep.runOn(fn, c.ops, c.cause, c.next)
	return C.PROSODY_OK
}

//export prosodyGo_cursor_release
func prosodyGo_cursor_release(id C.uint64_t, errOut **C.char) (status C.int) {
	const fn = "prosody_cursor_release"
	defer guard(fn, &status, errOut)
	return releaseOwned(fn, cursors, id, errOut, (*cursorEntry).close)
}

//export prosodyGo_state_release
func prosodyGo_state_release(id C.uint64_t, errOut **C.char) (status C.int) {
	const fn = "prosody_state_release"
	defer guard(fn, &status, errOut)
	return releaseOwned(fn, states, id, errOut, func(*stateEntry) {})
}
