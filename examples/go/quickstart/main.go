// The Quick Start in Go, in mock mode: an in-memory Kafka cluster inside
// this process, so it needs no broker and no Cassandra.
//
//	go run ./examples/go/quickstart
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
)

const messages = 5

func main() {
	cfg, err := config.Load(func(c *config.Config) {
		// Normally set with PROSODY_BOOTSTRAP_SERVERS; mock mode needs no broker.
		c.BootstrapServers = []string{"localhost:9092"}
		// To allow loopbacks, the source system must differ from the group id.
		c.SourceSystem = "my-application-source"
		c.GroupID = "my-application"
		c.SubscribedTopics = []string{"my-topic"}
		c.Mock = true
	})
	if err != nil {
		log.Fatal(err) // names the option that is wrong
	}
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}

	var handled, fired atomic.Int32
	done := make(chan struct{})
	var once sync.Once
	check := func() {
		if handled.Load() >= messages && fired.Load() >= 1 {
			once.Do(func() { close(done) })
		}
	}
	err = c.Subscribe(event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error {
			fmt.Printf("Received message: key=%s payload=%s\n", m.Key, m.Payload)
			var p struct {
				ScheduleFollowup bool `json:"schedule_followup"`
			}
			if json.Unmarshal(m.Payload, &p) == nil && p.ScheduleFollowup {
				// Timers are kept in memory in mock mode (Cassandra otherwise).
				if err := ctx.Schedule(time.Now().Add(time.Second)); err != nil {
					return err // transient by default: retried
				}
			}
			handled.Add(1)
			check()
			return nil
		},
		Timer: func(ctx *event.Context, t *event.Timer) error {
			fmt.Printf("Timer fired for key: %s at %s\n", t.Key, t.Time.Format(time.RFC3339))
			fired.Add(1)
			check()
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	if err := c.Send(ctx, "my-topic", "message-key", []byte(`{"content":"Hello, Kafka!","schedule_followup":true}`)); err != nil {
		log.Fatal(err)
	}
	for i := 1; i < messages; i++ {
		if err := c.Send(ctx, "my-topic", fmt.Sprintf("key-%d", i), []byte(fmt.Sprintf(`{"content":"message %d"}`, i))); err != nil {
			log.Fatal(err)
		}
	}

	select {
	case <-done:
	case <-time.After(30 * time.Second):
		log.Fatal("timed out")
	}
	if err := c.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("Handled %d messages and %d timer.\n", handled.Load(), fired.Load())
}
