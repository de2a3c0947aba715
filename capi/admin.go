package main

/*
#include "shims.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/admin"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/kafkasec"
)

var admins = newTable[*adminEntry](kindAdmin)

// adminEntry connects in the background (admin.New does network I/O, and
// no ABI call may block on I/O); operations wait for the connection on
// their own goroutines.
type adminEntry struct {
	ready chan struct{} // closed once a/err are set
	a     *admin.Client
	err   error

	mu       sync.Mutex
	released bool
}

func (e *adminEntry) client() (*admin.Client, error) {
	<-e.ready
	if e.err != nil {
		return nil, fmt.Errorf("connecting the admin client: %w", e.err)
	}
	return e.a, nil
}

//export prosodyGo_admin_new
func prosodyGo_admin_new(cfgJSON *C.char, out *C.uint64_t, errOut **C.char) (status C.int) {
	const fn = "prosody_admin_new"
	defer guard(fn, &status, errOut)
	js, err := goString(fn, "config_json", cfgJSON)
	if err != nil {
		return fail(errOut, err)
	}
	if out == nil {
		return fail(errOut, nullArg(fn, "admin"))
	}
	syncEnv()
	cfg, err := config.FromJSON([]byte(js))
	if err != nil {
		return fail(errOut, configError(err))
	}
	e := &adminEntry{ready: make(chan struct{})}
	go func() {
		a, err := admin.New(admin.Options{Brokers: cfg.BootstrapServers, Mock: cfg.Mock, Security: kafkasec.FromConfig(cfg)})
		e.mu.Lock()
		e.a, e.err = a, err
		released := e.released
		e.mu.Unlock()
		close(e.ready)
		if released && a != nil {
			a.Close()
		}
	}()
	id := newID(kindAdmin)
	admins.add(id, e)
	*out = C.uint64_t(id)
	return C.PROSODY_OK
}

//export prosodyGo_admin_create_topic
func prosodyGo_admin_create_topic(id C.uint64_t, topicJSON *C.char, cb C.prosody_completion_fn, ud C.uintptr_t, errOut **C.char) (status C.int) {
	const fn = "prosody_admin_create_topic"
	defer guard(fn, &status, errOut)
	js, err := goString(fn, "topic_json", topicJSON)
	if err != nil {
		return fail(errOut, err)
	}
	done, err := newCompletion(fn, "done", cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	e, err := admins.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	syncEnv()
	tc, err := config.TopicFromJSON([]byte(js))
	if err != nil {
		return fail(errOut, configError(err))
	}
	async(fn, done, func() error {
		a, err := e.client()
		if err != nil {
			return err
		}
		return a.CreateTopic(context.Background(), admin.SpecFrom(tc))
	})
	return C.PROSODY_OK
}

//export prosodyGo_admin_delete_topic
func prosodyGo_admin_delete_topic(id C.uint64_t, name *C.char, nameLen C.size_t, cb C.prosody_completion_fn, ud C.uintptr_t,
	errOut **C.char) (status C.int) {
	const fn = "prosody_admin_delete_topic"
	defer guard(fn, &status, errOut)
	topic, err := goBytes(fn, "name", unsafe.Pointer(name), nameLen)
	if err != nil {
		return fail(errOut, err)
	}
	if err := config.CheckTopicName(topic); err != nil {
		return fail(errOut, errorf(C.PROSODY_ERR_INVALID_ARGUMENT, "%s: name: %v", fn, err))
	}
	done, err := newCompletion(fn, "done", cb, ud)
	if err != nil {
		return fail(errOut, err)
	}
	e, err := admins.get(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	async(fn, done, func() error {
		a, err := e.client()
		if err != nil {
			return err
		}
		return a.DeleteTopic(context.Background(), topic)
	})
	return C.PROSODY_OK
}

//export prosodyGo_admin_release
func prosodyGo_admin_release(id C.uint64_t, errOut **C.char) (status C.int) {
	const fn = "prosody_admin_release"
	defer guard(fn, &status, errOut)
	e, err := admins.take(uint64(id))
	if err != nil {
		return fail(errOut, fmt.Errorf("%s: %w", fn, err))
	}
	e.mu.Lock()
	e.released = true
	a := e.a
	e.mu.Unlock()
	if a != nil {
		go a.Close() // Close waits for running calls: not on the host's thread
	}
	return C.PROSODY_OK
}
