package dedupstore

import "sync"

// coalescer runs calls in batches: a call that arrives while fewer than
// maxRunning batches are under way starts one at once (alone, when the
// store is idle, so a quiet consumer waits one round trip), and the calls
// that arrive meanwhile wait and go together in the next batch, up to
// maxBatch at a time. The busier the consumer, the larger the batches and
// the fewer the round trips per message, with no timer adding latency.
type coalescer[T any] struct {
	maxRunning, maxBatch int
	run                  func(batch []T) // runs one batch to its end, calling every callback in it

	mu      sync.Mutex
	queue   []T
	running int
}

func (c *coalescer[T]) add(x T) {
	c.mu.Lock()
	c.queue = append(c.queue, x)
	if c.running == c.maxRunning {
		c.mu.Unlock()
		return
	}
	c.running++
	batch := c.takeLocked()
	c.mu.Unlock()
	go c.loop(batch)
}

// loop runs batches until nothing waits.
func (c *coalescer[T]) loop(batch []T) {
	for {
		c.run(batch)
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		batch = c.takeLocked()
		c.mu.Unlock()
	}
}

// takeLocked removes the next batch from the queue into a slice of its own.
func (c *coalescer[T]) takeLocked() []T {
	n := min(len(c.queue), c.maxBatch)
	batch := make([]T, n)
	copy(batch, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:]) // the callbacks taken must not stay reachable
	c.queue = c.queue[:rest]
	return batch
}
