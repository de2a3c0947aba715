package client_test

import (
	"context"
	"log"
	"time"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
)

// A consumer that handles each message of a key in order and sets a
// follow-up timer for the key. Mock mode needs no Kafka or Cassandra.
func Example() {
	cfg, err := config.Load(func(c *config.Config) {
		c.BootstrapServers = []string{"localhost:9094"}
		c.GroupID = "orders-service"
		c.SubscribedTopics = []string{"orders"}
		c.Mock = true
	})
	if err != nil {
		log.Fatal(err) // names the option that is wrong
	}
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())

	err = c.Subscribe(event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error {
			log.Printf("%s: %s", m.Key, m.Payload)
			return ctx.Schedule(time.Now().Add(time.Minute))
		},
		Timer: func(ctx *event.Context, t *event.Timer) error {
			log.Printf("follow-up for %s", t.Key)
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Send(context.Background(), "orders", "order-42", []byte(`{"type":"order.placed"}`)); err != nil {
		log.Fatal(err)
	}
}
