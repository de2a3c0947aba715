package client

import (
	"context"
	"sync/atomic"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/producer"
)

// deadLetters writes low-latency mode's dead letters with the client's
// producer, so they carry the source-system header, obey send_timeout and
// go through the event-id cache like any send (core-behavior.md §4.13).
type deadLetters struct {
	p    *producer.Producer
	sent *atomic.Int64 // dead letters written, for the metrics
}

func (d deadLetters) SendJSON(ctx context.Context, topic, key string, value []byte, headers []event.Header) error {
	_, err := d.p.Send(ctx, topic, key, value, producerHeaders(headers)...)
	d.count(err)
	return err
}

func (d deadLetters) SendRaw(ctx context.Context, topic string, key, value []byte, headers []event.Header) error {
	_, err := d.p.SendRaw(ctx, topic, key, value, producerHeaders(headers)...)
	d.count(err)
	return err
}

func (d deadLetters) count(err error) {
	if err == nil && d.sent != nil {
		d.sent.Add(1)
	}
}

func producerHeaders(hs []event.Header) []producer.Header {
	out := make([]producer.Header, len(hs))
	for i, h := range hs {
		out[i] = producer.Header(h)
	}
	return out
}
