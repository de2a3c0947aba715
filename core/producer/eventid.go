package producer

import (
	"bytes"
	"encoding/json"
)

// eventID returns the event id of a JSON payload: the top-level field "id"
// when its value is a JSON string (core-behavior.md §8). Any other value
// type, a payload that is not an object, or one that cannot be scanned
// counts as "no id". If "id" appears more than once the last one wins, as in
// the original's JSON decoder.
//
// The payload comes from a JSON encoder, so it is scanned rather than fully
// validated: only the top-level keys are looked at and nested values are
// skipped by bracket matching, which costs one pass and no allocation except
// for ids that contain escapes. Key comparison is exact and case-sensitive
// (encoding/json-style struct decoding would also accept "ID" or "Id").
//
// The returned bytes alias payload unless the id contains escapes.
func eventID(payload []byte) ([]byte, bool) {
	s := scanner{b: payload}
	s.skipSpace()
	if !s.consume('{') {
		return nil, false
	}
	var id []byte
	found := false
	s.skipSpace()
	if s.consume('}') {
		return nil, false
	}
	for {
		s.skipSpace()
		key, keyEscaped, ok := s.stringSpan()
		if !ok {
			return nil, false
		}
		s.skipSpace()
		if !s.consume(':') {
			return nil, false
		}
		s.skipSpace()
		if isIDKey(key, keyEscaped) && s.peek() == '"' {
			raw, escaped, ok := s.stringSpan()
			if !ok {
				return nil, false
			}
			v, ok := decodeString(raw, escaped)
			if !ok {
				return nil, false
			}
			id, found = v, true
		} else {
			if !s.skipValue() {
				return nil, false
			}
			if isIDKey(key, keyEscaped) {
				// A later non-string "id" replaces an earlier string one.
				id, found = nil, false
			}
		}
		s.skipSpace()
		switch {
		case s.consume(','):
		case s.consume('}'):
			return id, found
		default:
			return nil, false
		}
	}
}

// isIDKey reports whether the quoted key span (quotes included) is "id".
func isIDKey(raw []byte, escaped bool) bool {
	if !escaped {
		return string(raw) == `"id"`
	}
	k, ok := decodeString(raw, true)
	return ok && string(k) == "id"
}

// decodeString turns a quoted JSON string span into its value. Escapes are
// rare in ids and keys, so they go through encoding/json for exactness.
func decodeString(raw []byte, escaped bool) ([]byte, bool) {
	if !escaped {
		return raw[1 : len(raw)-1], true
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false
	}
	return []byte(v), true
}

// scanner walks JSON text just far enough to find top-level fields.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// stringSpan reads a string starting at the current '"' and returns it with
// its quotes, and whether it contains escapes.
func (s *scanner) stringSpan() (raw []byte, escaped bool, ok bool) {
	if s.peek() != '"' {
		return nil, false, false
	}
	start := s.i
	s.i++
	for {
		j := bytes.IndexAny(s.b[s.i:], "\"\\")
		if j < 0 {
			return nil, false, false
		}
		s.i += j
		if s.b[s.i] == '"' {
			s.i++
			return s.b[start:s.i], escaped, true
		}
		// A backslash: skip it and the character it escapes; \uXXXX's
		// hex digits contain no quote or backslash, so scanning on is safe.
		escaped = true
		s.i += 2
		if s.i > len(s.b) {
			return nil, false, false
		}
	}
}

// skipValue skips one value of any type.
func (s *scanner) skipValue() bool {
	switch c := s.peek(); c {
	case '"':
		_, _, ok := s.stringSpan()
		return ok
	case '{', '[':
		return s.skipContainer()
	case 0:
		return false
	default:
		// A number or a literal (true, false, null): it runs until a
		// delimiter.
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.i > start
			}
			s.i++
		}
		return s.i > start
	}
}

// skipContainer skips an object or array by counting brackets, stepping over
// strings so brackets inside them do not count.
func (s *scanner) skipContainer() bool {
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			if _, _, ok := s.stringSpan(); !ok {
				return false
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				return true
			}
		}
		s.i++
	}
	return false
}
