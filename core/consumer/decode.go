package consumer

import (
	"errors"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/filter"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/payload"
)

// decode fills msg, which must be zero, from a record of the partition. A
// record that cannot be handled gets a non-zero reason and an error saying
// why; the caller logs it and commits it as skipped, so it is never lost
// silently.
//
// The key and id strings share the record's bytes rather than copying them,
// as Payload does: each fetch is decoded into fresh buffers and never
// writes to a record once delivered. The type comes from dec's cache.
func (p *partition) decode(r *fetch.Record, now time.Time, msg *event.Message) (filter.Reason, error) {
	return decodeRecord(&p.dec, p.topic, p.id, r, now, msg)
}

// decodeRecord is decode with the decoder dec, for a record of topic and
// partition.
func decodeRecord(dec *payload.Decoder, topic string, partition int32, r *fetch.Record, now time.Time, msg *event.Message) (filter.Reason, error) {
	if r.Key == nil {
		return filter.ReasonNoKey, errors.New("record has no key")
	}
	if !utf8.Valid(r.Key) {
		return filter.ReasonKeyNotUTF8, errors.New("record key is not valid UTF-8")
	}
	fields, err := dec.Meta(r.Value)
	if err != nil {
		if errors.Is(err, payload.ErrNull) {
			return filter.ReasonNullPayload, err
		}
		return filter.ReasonInvalidJSON, err
	}
	// Field by field: msg is zeroed (a fresh burst slice), and a struct
	// assignment would be a bulk copy with write barriers for every
	// pointer slot while the collector runs.
	msg.Topic = topic
	msg.Partition = partition
	msg.Offset = r.Offset
	msg.Key = unsafe.String(unsafe.SliceData(r.Key), len(r.Key))
	msg.Timestamp = recordTime(r, now)
	msg.Payload = r.Value
	msg.ID, msg.Type = fields.ID, fields.Type
	msg.HasID, msg.HasType = fields.HasID, fields.HasType
	if len(r.Headers) > 0 {
		msg.Headers = headersOf(r)
		msg.SourceSystem, _ = filter.SourceSystem(r.Headers)
	}
	return 0, nil
}

// recordTime is r's timestamp, or now for a record without one.
func recordTime(r *fetch.Record, now time.Time) time.Time {
	if r.Timestamp.IsZero() || r.Timestamp.Unix() <= 0 {
		return now
	}
	return r.Timestamp
}

// headersOf is r's headers as events carry them (nil when it has none).
func headersOf(r *fetch.Record) []event.Header {
	if len(r.Headers) == 0 {
		return nil
	}
	hs := make([]event.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = event.Header{Key: string(h.Key), Value: h.Value}
	}
	return hs
}

// undecodable is the record r, which decode refused for reason, as it goes
// to the failure topic: its key and value bytes unchanged.
func (p *partition) undecodable(r *fetch.Record, now time.Time, reason error) *middleware.Undecodable {
	return &middleware.Undecodable{Topic: p.topic, Partition: p.id, Offset: r.Offset, Timestamp: recordTime(r, now),
		Key: r.Key, Value: r.Value, Headers: headersOf(r), Reason: reason}
}
