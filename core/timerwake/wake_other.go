//go:build !linux

package timerwake

import "time"

// needed: elsewhere the runtime's timer waits have nanosecond timeouts
// (kqueue, Windows' high-resolution waits).
const needed = false

func wake(time.Duration) {}
