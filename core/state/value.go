package state

import (
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
)

// Value is a value collection of the event's key, in one attempt. Items
// are JSON text (or, in a message collection, MessageItem's encoding).
type Value struct{ handle }

// ValueOf opens the value collection name for the key of ctx's event.
func ValueOf(ctx *event.Context, name string) (*Value, error) {
	h, err := open(ctx, name, config.CollectionValue)
	if err != nil {
		return nil, err
	}
	return &Value{h}, nil
}

// Get returns the value; ok is false when there is none.
func (v *Value) Get() (item []byte, ok bool, err error) {
	if err := v.t.begin(); err != nil {
		return nil, false, err
	}
	defer v.t.mu.Unlock()
	if v.s.valueSet {
		return v.s.value, v.s.value != nil, nil
	}
	item, ok, err = v.t.p.svc.store.Value(v.t.ctx, v.t.key(), v.s.def.Name)
	return item, ok, storeError("reading "+v.s.def.Name, err)
}

// Set stages a new value. JSON null cannot be stored (ErrNullValue).
func (v *Value) Set(item []byte) error {
	if err := checkItem(v.s.def.Payload, item); err != nil {
		return err
	}
	if err := v.t.begin(); err != nil {
		return err
	}
	defer v.t.mu.Unlock()
	v.s.valueSet, v.s.value = true, clone(item)
	return nil
}

// Clear stages the value's removal.
func (v *Value) Clear() error {
	if err := v.t.begin(); err != nil {
		return err
	}
	defer v.t.mu.Unlock()
	v.s.valueSet, v.s.value = true, nil
	return nil
}

// clone copies an item the caller lent (a host's buffer).
func clone(b []byte) []byte { return append(make([]byte, 0, len(b)), b...) }
