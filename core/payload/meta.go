package payload

import (
	"errors"
	"fmt"
)

// ErrNull reports a null record value (a tombstone). The consumer treats it as
// undecodable (spec §3.4 rule 5) and skips or dead-letters the record.
var ErrNull = errors.New("payload is null")

// ErrInvalid reports a value that is not a JSON document (spec §3.4 rule 6).
// Errors returned by Meta wrap it together with the offset of the fault.
var ErrInvalid = errors.New("payload is not valid JSON")

// Fields holds what the hot path needs from a payload: the top-level "id" and
// "type" strings. HasID and HasType tell an absent (or non-string) field
// from a present empty string, which the filters treat differently.
type Fields struct {
	ID      string
	Type    string
	HasID   bool
	HasType bool
}

// Meta validates payload as one JSON document and extracts its top-level
// "id" and "type" fields.
//
// A field counts only when the document is an object and the field's value is
// a JSON string; its escape sequences are decoded. Any other value (number,
// object, array, true/false/null), a nested "id", and every non-object
// document (an array, a number, ...) leave the field absent: the original
// does the same, so a message without a string type always passes the
// allowed-events filter.
//
// Keys are compared exactly (case-sensitive) after unescaping, so "\u0069d"
// is "id" but "ID" is not. When a key repeats, the last occurrence decides,
// as in encoding/json and serde_json: {"id":"a","id":1} has no id.
//
// Validity follows encoding/json's json.Valid (including its nesting limit of
// 10000) with one addition: the document must be valid UTF-8, as RFC 8259 and
// the original's decoder require. Lone surrogate escapes such as "\ud800" are
// accepted and decode to U+FFFD, as in encoding/json.
//
// A nil payload is a null record and yields ErrNull. A non-nil empty payload
// is an empty value, not a tombstone, and yields ErrInvalid; callers must
// therefore pass the record value through unchanged. Every other failure
// wraps ErrInvalid.
//
// On success Meta allocates only the returned strings (plus a scratch
// buffer when an escaped value decodes to more than 64 bytes).
func Meta(payload []byte) (Fields, error) {
	return meta(payload, nil)
}

// err builds the error for the first fault the scanner recorded. It runs only
// on failure, so the formatting cost stays off the hot path.
func (s *scanner) err() error {
	if s.errAt >= len(s.data) {
		return fmt.Errorf("%w: unexpected end of input (%s)", ErrInvalid, s.errMsg)
	}
	return fmt.Errorf("%w: %s at offset %d (byte %q)", ErrInvalid, s.errMsg, s.errAt, s.data[s.errAt])
}

// Decoder is Meta for a stream of payloads, allocating nothing on the
// common path: an ID without escapes shares the payload's bytes instead of
// being copied, and Type comes from a small cache of the type strings seen
// last, since a topic carries few distinct types. Validation and results are
// exactly Meta's.
//
// The caller must not modify a payload while the ID taken from it is in use
// (a consumer record's value is never written once delivered), and should
// copy the ID if it keeps it longer than the payload, which it would
// otherwise pin in memory.
//
// The zero value is ready to use. A Decoder is not safe for concurrent use.
type Decoder struct {
	types [typeCache]string
	next  int
}

// typeCache is how many distinct type strings a Decoder remembers.
const typeCache = 8

// Meta is the package's Meta with the Decoder's sharing and cache.
func (d *Decoder) Meta(payload []byte) (Fields, error) {
	return meta(payload, d)
}

// meta is Meta, sharing and caching strings through dec when it is set. The
// scanner fills in the named result f in place: copying a local out at the
// return cost small payloads a third of their time.
func meta(payload []byte, dec *Decoder) (f Fields, err error) {
	if payload == nil {
		return Fields{}, ErrNull
	}
	s := scanner{data: payload, dec: dec}
	i, c := next(payload, 0)
	if c == '{' {
		i = s.object(i, &f)
	} else {
		i = s.value(i)
	}
	if i >= 0 {
		if i, _ = next(payload, i); i < len(payload) {
			i = s.fail(i, "data after top-level value")
		}
	}
	if i < 0 {
		return Fields{}, s.err()
	}
	return f, nil
}

// intern returns raw as a string from the cache, adding it (in place of the
// oldest entry) when it is not there.
func (d *Decoder) intern(raw []byte) string {
	// Ranging over the array itself would copy all of it first.
	for _, t := range &d.types {
		if t == string(raw) {
			return t
		}
	}
	t := string(raw)
	if len(t) <= 64 {
		d.types[d.next] = t
		d.next = (d.next + 1) % typeCache
	}
	return t
}
