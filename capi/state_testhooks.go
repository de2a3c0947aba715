//go:build capitest

package main

/*
#include "shims.h"
*/
import "C"

import (
	"unsafe"

	"github.com/prosody-events/prosody-go/core/state"
)

// shownItem is an item as the host sees it in a prosody_state_fn call.
type shownItem struct {
	key, value         []byte
	keyNull, valueNull bool
}

// showItems lays items out as a report hands them to the host, and reads
// them back from the C memory.
func showItems(items []state.Item, keyed bool) []shownItem {
	buf, first := cItems(items, keyed)
	defer C.free(buf)
	if first == nil {
		return nil
	}
	out := make([]shownItem, len(items))
	for i, it := range unsafe.Slice(first, len(items)) {
		out[i] = shownItem{keyNull: it.key == nil, valueNull: it.value == nil,
			key:   C.GoBytes(unsafe.Pointer(it.key), C.int(it.key_len)),
			value: C.GoBytes(unsafe.Pointer(it.value), C.int(it.value_len))}
	}
	return out
}
