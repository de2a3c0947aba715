package state

import (
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// Map is a map collection (string keys, ordered) of the event's key, in
// one attempt.
type Map struct{ handle }

// MapOf opens the map collection name for the key of ctx's event.
func MapOf(ctx *event.Context, name string) (*Map, error) {
	h, err := open(ctx, name, config.CollectionMap)
	if err != nil {
		return nil, err
	}
	return &Map{h}, nil
}

// staged answers for key from what the attempt wrote: the item (nil when
// removed), and whether the attempt decides it at all.
func (m *Map) staged(key string) ([]byte, bool) {
	if v, ok := m.s.puts[key]; ok {
		return v, true
	}
	return nil, m.s.cleared
}

// Get returns the entry at key; ok is false when there is none.
func (m *Map) Get(key string) (item []byte, ok bool, err error) {
	items, err := m.GetMany([]string{key})
	if err != nil {
		return nil, false, err
	}
	return items[0], items[0] != nil, nil
}

// Contains reports whether the map has an entry at key.
func (m *Map) Contains(key string) (bool, error) {
	_, ok, err := m.Get(key)
	return ok, err
}

// GetMany returns the entries at keys, position by position, nil where
// absent; a key given twice is answered twice.
func (m *Map) GetMany(keys []string) ([][]byte, error) {
	if err := m.t.begin(); err != nil {
		return nil, err
	}
	defer m.t.mu.Unlock()
	out := make([][]byte, len(keys))
	var missing []string
	var at []int
	for i, k := range keys {
		if v, decided := m.staged(k); decided {
			out[i] = v
			continue
		}
		missing = append(missing, k)
		at = append(at, i)
	}
	if len(missing) == 0 {
		return out, nil
	}
	got, err := m.t.p.svc.store.MapGet(m.t.ctx, m.t.key(), m.s.def.Name, missing)
	if err != nil {
		return nil, storeError("reading "+m.s.def.Name, err)
	}
	for j, i := range at {
		out[i] = got[j]
	}
	return out, nil
}

// Set stages the entry at key.
func (m *Map) Set(key string, item []byte) error {
	if err := checkItem(m.s.def.Payload, item); err != nil {
		return err
	}
	if n := len(key) + len(item); n > statestore.MaxItemSize {
		// The store counts an entry's key with its value.
		return newError(ErrTooLarge, "keyed state: a map entry of %d bytes (a key of %d and its item) is larger than the %d bytes one entry may take",
			n, len(key), statestore.MaxItemSize)
	}
	if err := m.t.begin(); err != nil {
		return err
	}
	defer m.t.mu.Unlock()
	m.put(key, clone(item))
	return nil
}

// Remove stages the removal of the entry at key.
func (m *Map) Remove(key string) error {
	if err := m.t.begin(); err != nil {
		return err
	}
	defer m.t.mu.Unlock()
	m.put(key, nil)
	return nil
}

func (m *Map) put(key string, item []byte) {
	if m.s.puts == nil {
		m.s.puts = make(map[string][]byte)
	}
	m.s.puts[key] = item
}

// Clear stages the removal of every entry.
func (m *Map) Clear() error {
	if err := m.t.begin(); err != nil {
		return err
	}
	defer m.t.mu.Unlock()
	m.s.cleared, m.s.puts = true, nil
	return nil
}

// Scan returns a cursor over the map's entries in key order (dir), the
// attempt's own writes included; with keysOnly, items carry no values.
func (m *Map) Scan(dir statestore.Direction, keysOnly bool) (*Cursor, error) {
	if err := m.t.begin(); err != nil {
		return nil, err
	}
	defer m.t.mu.Unlock()
	return &Cursor{t: m.t, next: (&mapScan{m: m, dir: dir, keysOnly: keysOnly}).chunk}, nil
}
