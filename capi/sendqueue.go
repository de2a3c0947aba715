package main

import (
	"context"
	"sync"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/producer"
)

// sendQueue hands a client's sends to the producer in the order the host
// made them. A host starts many sends without waiting for each (a Node
// program's un-awaited sends, asyncio.gather); a goroutine per send would
// reach Kafka in whatever order the scheduler picked, and records of one
// key would be written out of order. One drainer begins the queued sends
// one after another (begin returns once sarama holds the record) and waits
// for their delivery reports on goroutines of their own. It runs only
// while sends are queued.
type sendQueue struct {
	mu      sync.Mutex
	pending []queuedSend
	running bool
	// inFlight counts sends whose completion has not been called yet;
	// release waits for them (idle), so that their callbacks come first.
	inFlight int
	idle     sync.Cond
}

type queuedSend struct {
	ctx        context.Context
	topic, key string
	payload    []byte
	done       completion
}

func (q *sendQueue) push(c *client.Client, s queuedSend) {
	q.mu.Lock()
	q.inFlight++
	q.pending = append(q.pending, s)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.drain(c)
	}
}

func (q *sendQueue) drain(c *client.Client) {
	var batch []queuedSend
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		batch, q.pending = q.pending, batch[:0]
		q.mu.Unlock()
		for i, s := range batch {
			begun, err := begin(c, s)
			if err != nil {
				s.done.call(err)
				q.finished()
			} else {
				asyncThen("prosody_client_send", s.done, q.finished, func() error {
					_, err := begun.Wait()
					return err
				})
			}
			batch[i] = queuedSend{}
		}
	}
}

// begin is BeginSend with a panic reported as an error: the drainer runs
// on its own goroutine, where a panic would end the host's process.
func begin(c *client.Client, s queuedSend) (begun *producer.Sending, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = internalError("prosody_client_send", r)
		}
	}()
	return c.BeginSend(s.ctx, s.topic, s.key, s.payload)
}

// finished counts a send whose completion has been called.
func (q *sendQueue) finished() {
	q.mu.Lock()
	if q.inFlight--; q.inFlight == 0 && q.idle.L != nil {
		q.idle.Broadcast()
	}
	q.mu.Unlock()
}

// wait returns once every send pushed so far has been completed.
func (q *sendQueue) wait() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.idle.L == nil {
		q.idle.L = &q.mu
	}
	for q.inFlight > 0 {
		q.idle.Wait()
	}
}
