package consumer

import (
	"errors"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/filter"
	"github.com/prosody-events/prosody-go/core/payload"
)

// decode turns a record into a Message. A record that cannot be handled
// gets a non-zero reason and an error saying why; the caller logs it and
// commits it as skipped, so it is never lost silently.
func decode(r *sarama.ConsumerMessage, now time.Time) (*event.Message, filter.Reason, error) {
	if r.Key == nil {
		return nil, filter.ReasonNoKey, errors.New("record has no key")
	}
	if !utf8.Valid(r.Key) {
		return nil, filter.ReasonKeyNotUTF8, errors.New("record key is not valid UTF-8")
	}
	fields, err := payload.Meta(r.Value)
	if err != nil {
		if errors.Is(err, payload.ErrNull) {
			return nil, filter.ReasonNullPayload, err
		}
		return nil, filter.ReasonInvalidJSON, err
	}
	ts := r.Timestamp
	if ts.IsZero() || ts.Unix() <= 0 {
		ts = now
	}
	msg := &event.Message{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Key:       string(r.Key),
		Timestamp: ts,
		Payload:   r.Value,
		ID:        fields.ID,
		Type:      fields.Type,
		HasID:     fields.HasID,
		HasType:   fields.HasType,
	}
	if len(r.Headers) > 0 {
		msg.Headers = make([]event.Header, len(r.Headers))
		for i, h := range r.Headers {
			msg.Headers[i] = event.Header{Key: string(h.Key), Value: h.Value}
		}
		msg.SourceSystem, _ = filter.SourceSystem(r.Headers)
	}
	return msg, 0, nil
}
