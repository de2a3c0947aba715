package main

import (
	"fmt"
	"testing"
)

// The healthy count is computed from key numbers; the handler judges the
// keys themselves. They must agree, or the failing reader's healthy rate
// would wait for a count it never reaches.
func TestFailingIndexMatchesFailingKey(t *testing.T) {
	for k := range 200_000 {
		if got, want := failingIndex(k), failingKey(fmt.Sprintf("key-%05d", k)); got != want {
			t.Fatalf("key number %d: failingIndex %v, failingKey %v", k, got, want)
		}
	}
}
