package consumer

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/middleware"
)

// TestSkippedRecordsAreCommitted feeds one partition every kind of record
// that must not reach the handler (loop, disallowed type, no key, non-UTF-8
// key, invalid JSON, tombstone) between records that must. Only the latter
// are handled, and after the consumer stops every offset is committed.
func TestSkippedRecordsAreCommitted(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			topic := createTopic(t, tg, 1)
			opts := baseOptions(tg, topic)
			// "user" has no separator on purpose: prefixes match anchored at the
			// start with no separator logic, so "username.changed" passes too.
			opts.AllowedEvents = []string{"user", "account."}
			loop := []sarama.RecordHeader{{Key: []byte("source-system"), Value: []byte(opts.GroupID)}}
			other := []sarama.RecordHeader{{Key: []byte("source-system"), Value: []byte("another-service")}}
			records := []record{
				{key: "a", value: `{"type":"user.created","n":1}`},
				{key: "a", value: `{"type":"user.created","n":2}`, headers: loop},
				{key: "a", value: `{"type":"user.updated","n":3}`, headers: other},
				{key: "b", value: `{"type":"order.placed","n":4}`},
				{key: "b", value: `{"n":5}`},
				{key: "b", value: `{"type":7,"n":6}`},
				{nilKey: true, value: `{"type":"user.x","n":7}`},
				{rawKey: []byte{0xff, 0xfe}, value: `{"type":"user.x","n":8}`},
				{key: "c", value: `{"type":"user.x",`},
				{key: "c", nilValue: true},
				{key: "c", value: `{"type":"username.changed","n":11}`},
				{key: "c", value: `{"type":"account.closed","n":12}`},
			}
			wantHandled := []string{`"n":1`, `"n":3`, `"n":5`, `"n":6`, `"n":11`, `"n":12`}
			produce(t, tg, topic, records)

			var mu sync.Mutex
			var got []string
			handler := event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, string(m.Payload))
				return nil
			}}
			c, err := Start(withStacks(opts, handler, middleware.NewFIFOScheduler(4)))
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, time.Minute, "every record accounted for", func() bool {
				s := c.Stats()
				return s.Handled()+s.Filtered()+s.Undecodable() == int64(len(records))
			})
			stopConsumer(t, c)

			mu.Lock()
			defer mu.Unlock()
			if len(got) != len(wantHandled) {
				t.Fatalf("handled %d records %v, want %d", len(got), got, len(wantHandled))
			}
			for _, w := range wantHandled {
				found := false
				for _, g := range got {
					if strings.Contains(g, w) {
						found = true
					}
				}
				if !found {
					t.Errorf("record with %s was not handled; handled %v", w, got)
				}
			}
			if s := c.Stats(); s.Filtered() != 2 || s.Undecodable() != 4 {
				t.Errorf("filtered %d undecodable %d, want 2 and 4", s.Filtered(), s.Undecodable())
			}
			committed := committedOffsets(t, tg, opts.GroupID, topic, 1)
			if committed[0] != int64(len(records)) {
				t.Fatalf("committed offset %d, want %d (every record, skipped ones included)", committed[0], len(records))
			}
		})
	}
}
