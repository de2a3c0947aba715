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
	"unicode/utf8"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/logging"
	"github.com/prosody-events/prosody-go/core/tracing"
)

var clients = newTable[*clientEntry](kindClient)

// clientEntry is what a client handle names.
type clientEntry struct {
	c    *client.Client
	disp *dispatcher
	// sendErr says why this client cannot send, if it cannot.
	sendErr error
	sends   sendQueue

	// mu guards the subscription state as the host sees it. Tracking it
	// here, not only in the core, lets subscribe and unsubscribe report
	// state errors at once. Their work, and release's, runs in the order
	// the host called them: each waits until the one before has run and
	// reported its completion (lastOp), so that a subscribe right after an
	// unsubscribe does not race it in the core, and completions arrive in
	// call order.
	mu         sync.Mutex
	subscribed bool
	subGen     uint64        // counts subscribes; a failed one resets subscribed only if it is still the latest
	released   bool          // prosody_client_release was called
	lastOp     chan struct{} // closed when the latest subscribe, unsubscribe or release has completed
	notify     *notifier     // the subscription's notify callback, if any
	// consuming is what the running subscription is (procs.go). Only the
	// ordered operations' work (after waitFor) reads and writes it.
	consuming consumerKind
}

// setConsuming records what runs now, for the process's count of Go
// processors.
func (e *clientEntry) setConsuming(k consumerKind) {
	consumerChanged(e.consuming, k)
	e.consuming = k
}

// nextOp returns the channel to wait on before running a subscribe or
// unsubscribe and the one to close when it has finished. The caller holds
// e.mu.
func (e *clientEntry) nextOp() (prev <-chan struct{}, done chan struct{}) {
	prev, done = e.lastOp, make(chan struct{})
	e.lastOp = done
	return prev, done
}

func waitFor(op <-chan struct{}) {
	if op != nil {
		<-op
	}
}

//export prosodyGo_version
func prosodyGo_version(out **C.char) (status C.int) {
	defer guard("prosody_version", &status, nil)
	if out == nil {
		return C.PROSODY_ERR_INVALID_ARGUMENT
	}
	*out = versionC
	return C.PROSODY_OK
}

// versionC is allocated once and never freed: the host gets a static string.
var versionC = C.CString(Version)

// goString copies a required NUL-terminated argument (a JSON document).
func goString(fn, name string, s *C.char) (string, error) {
	if s == nil {
		return "", nullArg(fn, name)
	}
	return C.GoString(s), nil
}

// goBytes copies an argument given as a pointer and a length, every byte
// as it is (NUL included). NULL is allowed only with length 0.
func goBytes(fn, name string, p unsafe.Pointer, n C.size_t) (string, error) {
	if n == 0 {
		return "", nil
	}
	if p == nil {
		return "", errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: %s is NULL but %s_len is %d", fn, name, name, uint64(n))
	}
	return string(unsafe.Slice((*byte)(p), n)), nil
}

// hasField reports whether a struct the host sized (size bytes) holds a
// field that ends end bytes into it: a host built against an older header
// gives a smaller size, and its missing fields count as zero.
func hasField(size C.size_t, end uintptr) bool { return uintptr(size) >= end }

func configError(err error) error { return &apiError{status: C.PROSODY_ERR_CONFIG, msg: err.Error()} }

//export prosodyGo_client_new
func prosodyGo_client_new(cfgJSON *C.char, out *C.uint64_t, errOut **C.char) (status C.int) {
	defer guard("prosody_client_new", &status, errOut)
	const fn = "prosody_client_new"
	js, err := goString(fn, "config_json", cfgJSON)
	if err != nil {
		return fail(errOut, err)
	}
	if out == nil {
		return fail(errOut, nullArg(fn, "client"))
	}
	syncEnv()
	cfg, err := config.FromJSON([]byte(js))
	if err != nil {
		return fail(errOut, configError(err))
	}
	level, err := logging.Level(cfg.Log)
	if err != nil {
		return fail(errOut, configError(err))
	}
	disp, err := newDispatcher()
	if err != nil {
		return fail(errOut, err)
	}
	c, err := client.New(cfg, client.WithLogger(newLogger(level)))
	if err != nil {
		disp.closeFd()
		return fail(errOut, configError(err))
	}
	e := &clientEntry{c: c, disp: disp}
	if err := cfg.ValidateProducer(); err != nil {
		e.sendErr = configError(fmt.Errorf("this client cannot send: %w", err))
	}
	id := newID(kindClient)
	clients.add(id, e)
	*out = C.uint64_t(id)
	return C.PROSODY_OK
}

//export prosodyGo_client_release
func prosodyGo_client_release(id C.uint64_t, cb C.prosody_completion_fn, ud C.uintptr_t, errOut **C.char) (status C.int) {
	defer guard("prosody_client_release", &status, errOut)
	e, err := clients.take(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("prosody_client_release: %w", err))
	}
	// Its state handles, cursors and readers go with it, at once; the
	// operations already queued on them still report.
	e.disp.owned.releaseAll()
	// Release takes its place in the order of subscribes and unsubscribes:
	// it completes after them, and a subscribe queued before it finds the
	// client released instead of starting a consumer.
	e.mu.Lock()
	e.released = true
	prev, opDone := e.nextOp()
	e.mu.Unlock()
	asyncThen("prosody_client_release", completion{fn: cb, ud: ud}, func() { close(opDone) }, func() error {
		defer e.disp.closeFd()
		// Failing the events the host holds first lets an unsubscribe still
		// running (it drains the partitions) finish.
		e.disp.close()
		waitFor(prev)
		err := e.c.Close(context.Background())
		e.setConsuming(consumerNone)
		// Closing flushed the producer; the sends' callbacks come first.
		e.sends.wait()
		return err
	})
	return C.PROSODY_OK
}

//export prosodyGo_client_send
func prosodyGo_client_send(id C.uint64_t, topic *C.char, topicLen C.size_t, key *C.char, keyLen C.size_t,
	payload *C.uint8_t, n C.size_t, trace *C.prosody_trace_context, cb C.prosody_completion_fn, ud C.uintptr_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_client_send"
	defer guard(fn, &status, errOut)
	t, err := goBytes(fn, "topic", unsafe.Pointer(topic), topicLen)
	if err != nil {
		return fail(errOut, err)
	}
	if err := config.CheckTopicName(t); err != nil {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%v", err))
	}
	k, err := goBytes(fn, "key", unsafe.Pointer(key), keyLen)
	if err != nil {
		return fail(errOut, err)
	}
	if !utf8.ValidString(k) {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "key %q: must be valid UTF-8", k))
	}
	if payload == nil && n > 0 {
		return fail(errOut, nullArg(fn, "payload"))
	}
	tf, err := traceFields(fn, trace)
	if err != nil {
		return fail(errOut, err)
	}
	done, err := newCompletion(fn, "done", cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	e, err := clients.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	if e.sendErr != nil {
		return fail(errOut, e.sendErr)
	}
	var body []byte
	if n > 0 {
		body = append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(payload)), n)...)
	}
	ctx := tf.Context(context.Background())
	e.sends.push(e.c, queuedSend{ctx: ctx, topic: t, key: k, payload: body, done: done})
	return C.PROSODY_OK
}

//export prosodyGo_client_subscribe
func prosodyGo_client_subscribe(id C.uint64_t, h *C.prosody_handler_config, cb C.prosody_completion_fn,
	ud C.uintptr_t, errOut **C.char) (status C.int) {
	const fn = "prosody_client_subscribe"
	defer guard(fn, &status, errOut)
	if h == nil {
		return fail(errOut, nullArg(fn, "handler"))
	}
	hc, err := handlerConfigOf(fn, h)
	if err != nil {
		return fail(errOut, err)
	}
	done, err := newCompletion(fn, "done", cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	e, err := clients.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	switch state, err := e.c.ConsumerState(); {
	case err != nil:
		return fail(errOut, configError(fmt.Errorf("cannot subscribe: %w", err)))
	case state == client.Unconfigured:
		return fail(errOut, configError(fmt.Errorf("cannot subscribe: no consumer configured: set group_id and subscribed_topics")))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.released {
		// Released since the handle was looked up: its completion would
		// come after the release's.
		return fail(errOut, fmt.Errorf("%s: %w", fn, clients.invalid(uint64(id))))
	}
	if e.subscribed {
		return fail(errOut, errorf(C.PROSODY_ERR_STATE, "the client is already subscribed: unsubscribe first"))
	}
	e.subscribed = true
	e.subGen++
	gen := e.subGen
	prev, opDone := e.nextOp()
	hostData, onEvent := hc.userData, hc.onEvent
	notify := e.disp.notify.install(hc.notify, hostData)
	e.notify = notify
	asyncThen(fn, done, func() { close(opDone) }, func() error {
		started := false
		defer func() {
			if started {
				return
			}
			// Failed (or panicked): undo what the call did.
			e.mu.Lock()
			if e.subGen == gen {
				// Not if the host has unsubscribed and subscribed again
				// since: that subscription's state is not ours to reset.
				e.subscribed = false
			}
			e.mu.Unlock()
			e.disp.notify.remove(notify)
		}()
		waitFor(prev)
		e.mu.Lock()
		released := e.released
		e.mu.Unlock()
		if released {
			return client.ErrClosed
		}
		var handler event.Handler = e.disp
		kind := consumerPolling
		if onEvent != nil {
			handler = &directHandler{d: e.disp, fn: C.uintptr_t(uintptr(unsafe.Pointer(onEvent))), ud: hostData}
			kind = consumerDirect
		}
		if err := e.c.Subscribe(handler); err != nil {
			return err
		}
		started = true
		e.setConsuming(kind)
		e.disp.wakeIfPending()
		return nil
	})
	return C.PROSODY_OK
}

//export prosodyGo_client_unsubscribe
func prosodyGo_client_unsubscribe(id C.uint64_t, cb C.prosody_completion_fn, ud C.uintptr_t, errOut **C.char) (status C.int) {
	const fn = "prosody_client_unsubscribe"
	defer guard(fn, &status, errOut)
	done, err := newCompletion(fn, "done", cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	e, err := clients.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.released {
		return fail(errOut, fmt.Errorf("%s: %w", fn, clients.invalid(uint64(id))))
	}
	if !e.subscribed {
		return fail(errOut, errorf(C.PROSODY_ERR_STATE, "the client is not subscribed"))
	}
	e.subscribed = false
	notify := e.notify
	prev, opDone := e.nextOp()
	asyncThen(fn, done, func() { close(opDone) }, func() error {
		// This subscription's callback only (the host may have subscribed
		// again meanwhile), and even if unsubscribing panics.
		defer e.disp.notify.remove(notify)
		waitFor(prev)
		defer e.setConsuming(consumerNone) // stopped, even if the final commit failed
		return e.c.Unsubscribe(context.Background())
	})
	return C.PROSODY_OK
}

//export prosodyGo_client_event_fd
func prosodyGo_client_event_fd(id C.uint64_t, out *C.int, errOut **C.char) (status C.int) {
	const fn = "prosody_client_event_fd"
	defer guard(fn, &status, errOut)
	e, st := queryClient(fn, id, out == nil, "fd", errOut)
	if st != C.PROSODY_OK {
		return st
	}
	*out = C.int(e.disp.wfd.readFD())
	return C.PROSODY_OK
}

//export prosodyGo_client_poll
func prosodyGo_client_poll(id C.uint64_t, out *C.prosody_event, capacity, eventSize C.size_t, count *C.size_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_client_poll"
	defer guard(fn, &status, errOut)
	if count == nil {
		return fail(errOut, nullArg(fn, "count"))
	}
	*count = 0
	if out == nil && capacity > 0 {
		return fail(errOut, nullArg(fn, "out"))
	}
	if eventSize < minEventSize {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
			"%s: event_size is %d: pass sizeof(prosody_event) (at least %d)", fn, uint64(eventSize), uint64(minEventSize)))
	}
	e, err := clients.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	if capacity == 0 {
		return C.PROSODY_OK
	}
	*count = C.size_t(e.disp.poll(eventArray{base: unsafe.Pointer(out), n: pollCapacity(capacity), stride: uintptr(eventSize)}))
	return C.PROSODY_OK
}

// pollCapacity is the host's capacity as a count of items to poll. One past
// what an int holds (SIZE_MAX for "as many as there are") would wrap
// negative and poll nothing, leaving the fd readable for ever.
func pollCapacity(capacity C.size_t) int { return int(min(capacity, C.size_t(math.MaxInt32))) }

// queryClient is the preamble the client queries share: the out-parameter
// must be there and the handle must name a live client.
func queryClient(fn string, id C.uint64_t, outMissing bool, outName string, errOut **C.char) (*clientEntry, C.int) {
	if outMissing {
		return nil, fail(errOut, nullArg(fn, outName))
	}
	e, err := clients.get(uint64(id))
	if err != nil {
		return nil, fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	return e, C.PROSODY_OK
}

//export prosodyGo_client_consumer_state
func prosodyGo_client_consumer_state(id C.uint64_t, out *C.int, errOut **C.char) (status C.int) {
	const fn = "prosody_client_consumer_state"
	defer guard(fn, &status, errOut)
	e, st := queryClient(fn, id, out == nil, "state", errOut)
	if st != C.PROSODY_OK {
		return st
	}
	state, err := e.c.ConsumerState()
	if err != nil {
		return fail(errOut, configError(err))
	}
	switch state {
	case client.Running:
		*out = C.PROSODY_CONSUMER_RUNNING
	case client.Configured:
		*out = C.PROSODY_CONSUMER_CONFIGURED
	default:
		*out = C.PROSODY_CONSUMER_UNCONFIGURED
	}
	return C.PROSODY_OK
}

//export prosodyGo_client_source_system
func prosodyGo_client_source_system(id C.uint64_t, out **C.char, errOut **C.char) (status C.int) {
	const fn = "prosody_client_source_system"
	defer guard(fn, &status, errOut)
	e, st := queryClient(fn, id, out == nil, "source_system", errOut)
	if st != C.PROSODY_OK {
		return st
	}
	*out = C.CString(e.c.SourceSystem())
	return C.PROSODY_OK
}

//export prosodyGo_client_assigned_partition_count
func prosodyGo_client_assigned_partition_count(id C.uint64_t, out *C.uint32_t, errOut **C.char) (status C.int) {
	const fn = "prosody_client_assigned_partition_count"
	defer guard(fn, &status, errOut)
	e, st := queryClient(fn, id, out == nil, "count", errOut)
	if st != C.PROSODY_OK {
		return st
	}
	*out = C.uint32_t(e.c.AssignedPartitionCount())
	return C.PROSODY_OK
}

//export prosodyGo_client_is_stalled
func prosodyGo_client_is_stalled(id C.uint64_t, out *C.int, errOut **C.char) (status C.int) {
	const fn = "prosody_client_is_stalled"
	defer guard(fn, &status, errOut)
	e, st := queryClient(fn, id, out == nil, "stalled", errOut)
	if st != C.PROSODY_OK {
		return st
	}
	*out = 0
	if e.c.IsStalled() {
		*out = 1
	}
	return C.PROSODY_OK
}

// traceFields copies the host's trace context; NULL means none. Fields
// beyond the size the host gave count as absent.
func traceFields(fn string, t *C.prosody_trace_context) (tracing.Fields, error) {
	if t == nil {
		return tracing.Fields{}, nil
	}
	if t.size < C.size_t(unsafe.Sizeof(t.size)) {
		return tracing.Fields{}, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
			"%s: trace->size is %d: set it to sizeof(prosody_trace_context)", fn, uint64(t.size))
	}
	// A field is read only once the host's size says it is there: a host
	// built against an older header has no memory behind the rest.
	var f tracing.Fields
	var err error
	if hasField(t.size, unsafe.Offsetof(t.traceparent_len)+unsafe.Sizeof(t.traceparent_len)) {
		if f.TraceParent, err = goBytes(fn, "trace->traceparent", unsafe.Pointer(t.traceparent), t.traceparent_len); err != nil {
			return tracing.Fields{}, err
		}
	}
	if hasField(t.size, unsafe.Offsetof(t.tracestate_len)+unsafe.Sizeof(t.tracestate_len)) {
		if f.TraceState, err = goBytes(fn, "trace->tracestate", unsafe.Pointer(t.tracestate), t.tracestate_len); err != nil {
			return tracing.Fields{}, err
		}
	}
	if hasField(t.size, unsafe.Offsetof(t.baggage_len)+unsafe.Sizeof(t.baggage_len)) {
		if f.Baggage, err = goBytes(fn, "trace->baggage", unsafe.Pointer(t.baggage), t.baggage_len); err != nil {
			return tracing.Fields{}, err
		}
	}
	return f, nil
}

// handlerConfig is the part of a prosody_handler_config the host's size
// covers.
type handlerConfig struct {
	notify   C.prosody_notify_fn
	userData C.uintptr_t
	onEvent  C.prosody_event_fn
}

func handlerConfigOf(fn string, h *C.prosody_handler_config) (handlerConfig, error) {
	if h.size < C.size_t(unsafe.Sizeof(h.size)) {
		return handlerConfig{}, errorf(C.PROSODY_ERR_INVALID_ARGUMENT,
			"%s: handler->size is %d: set it to sizeof(prosody_handler_config)", fn, uint64(h.size))
	}
	var hc handlerConfig
	if hasField(h.size, unsafe.Offsetof(h.notify)+unsafe.Sizeof(h.notify)) {
		hc.notify = h.notify
	}
	if hasField(h.size, unsafe.Offsetof(h.user_data)+unsafe.Sizeof(h.user_data)) {
		hc.userData = C.prosodyInt_handler_user_data(h)
	}
	if hasField(h.size, unsafe.Offsetof(h.on_event)+unsafe.Sizeof(h.on_event)) {
		hc.onEvent = h.on_event
	}
	return hc, nil
}

//export prosodyGo_config_schema
func prosodyGo_config_schema(out **C.char, errOut **C.char) (status C.int) {
	const fn = "prosody_config_schema"
	defer guard(fn, &status, errOut)
	if out == nil {
		return fail(errOut, nullArg(fn, "schema_json"))
	}
	*out = C.CString(string(config.SchemaJSON()))
	return C.PROSODY_OK
}
