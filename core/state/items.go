package state

import (
	"bytes"
	"time"

	json "github.com/goccy/go-json"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// An item of a JSON collection is JSON text. An item of a message
// collection is the message as a JSON object (MessageItem), so that every
// binding can read it without a decoder of ours.

// messageItem is the stored form of a message.
type messageItem struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Key       string          `json:"key"`
	Timestamp int64           `json:"timestamp"` // epoch milliseconds
	Payload   json.RawMessage `json:"payload"`
}

// MessageItem is m as an item of a message collection: its topic,
// partition, offset, key, timestamp (to the millisecond) and payload.
func MessageItem(m *event.Message) ([]byte, error) {
	payload := m.Payload
	if len(payload) == 0 {
		payload = []byte("null")
	}
	return json.Marshal(messageItem{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key,
		Timestamp: m.Timestamp.UnixMilli(), Payload: payload})
}

// DecodeMessage reads an item of a message collection back.
func DecodeMessage(item []byte) (*event.Message, error) {
	var mi messageItem
	if err := json.Unmarshal(item, &mi); err != nil {
		return nil, newError(ErrInvalidItem, "keyed state: a stored message does not decode: %v", err)
	}
	return &event.Message{Topic: mi.Topic, Partition: mi.Partition, Offset: mi.Offset, Key: mi.Key,
		Timestamp: time.UnixMilli(mi.Timestamp).UTC(), Payload: mi.Payload}, nil
}

var null = []byte("null")

// checkItem says why item cannot be written to a collection of payload p.
func checkItem(p config.PayloadKind, item []byte) error {
	if len(item) > statestore.MaxItemSize {
		return newError(ErrTooLarge, "keyed state: an item of %d bytes is larger than the %d bytes one item may take",
			len(item), statestore.MaxItemSize)
	}
	trimmed := bytes.TrimSpace(item)
	if len(trimmed) == 0 || bytes.Equal(trimmed, null) {
		return ErrNullValue
	}
	if !json.Valid(trimmed) {
		return newError(ErrInvalidItem, "keyed state: the item is not valid JSON")
	}
	if p != config.PayloadMessage {
		return nil
	}
	var mi map[string]json.RawMessage
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &mi) != nil {
		return newError(ErrInvalidItem, "keyed state: a message collection stores messages, got another JSON value")
	}
	for _, f := range []string{"topic", "partition", "offset", "key", "timestamp", "payload"} {
		if _, ok := mi[f]; !ok {
			return newError(ErrInvalidItem, "keyed state: a message collection stores messages; the item has no %q", f)
		}
	}
	return nil
}
