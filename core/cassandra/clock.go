package cassandra

import (
	"sync/atomic"
	"time"
)

// clock hands out strictly increasing write timestamps (microseconds since
// the epoch). gocql's own client-side timestamps are plain wall-clock reads,
// so two writes issued within one microsecond, or across a backwards clock
// step, could get equal or decreasing timestamps; Cassandra then resolves an
// insert followed by a delete of the same cell in the wrong order.
type clock struct{ last atomic.Int64 }

func (c *clock) next() int64 {
	for {
		now := time.Now().UnixMicro()
		last := c.last.Load()
		if now <= last {
			now = last + 1
		}
		if c.last.CompareAndSwap(last, now) {
			return now
		}
	}
}
