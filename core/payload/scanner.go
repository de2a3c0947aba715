package payload

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// maxDepth matches encoding/json's nesting limit, so a document is valid here
// exactly when json.Valid accepts it (and it is UTF-8). It also bounds the
// recursion of the scanner.
const maxDepth = 10000

// plain marks the bytes that may appear unescaped inside a JSON string and
// need no further look: printable ASCII except '"' and '\\'. Everything else
// (quote, backslash, control bytes, UTF-8 lead bytes) takes the slow path.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanner is a recursive-descent JSON validator that skips values without
// building them. On failure it records the first fault and returns false;
// Meta turns that into an error.
type scanner struct {
	data  []byte
	pos   int
	depth int
	// dec, when set, lets the top-level fields share the payload's bytes
	// (id) or come from its cache (type) instead of being copied.
	dec *Decoder

	errAt  int
	errMsg string
}

// field identifies the top-level keys Meta extracts.
type field uint8

const (
	fieldOther field = iota
	fieldID
	fieldType
)

func (s *scanner) fail(at int, msg string) bool {
	s.errAt, s.errMsg = at, msg
	return false
}

// peek returns the current byte, or 0 at the end of input (0 is never valid
// where peek's result is tested, so the caller's fault path reports the end).
func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		// Most calls find a structural byte at once; one compare rules out
		// whitespace for every byte above ' '.
		c := s.data[s.pos]
		if c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return
		}
		s.pos++
	}
}

// object scans an object starting at '{'. At the top level f is non-nil and
// receives the string values of "id" and "type"; nested objects pass nil and
// are only validated.
func (s *scanner) object(f *Fields) bool {
	if !s.enter() {
		return false
	}
	s.pos++ // '{'
	s.skipSpace()
	if s.peek() == '}' {
		s.pos++
		s.depth--
		return true
	}
	for {
		if s.peek() != '"' {
			return s.fail(s.pos, "expected object key")
		}
		key, esc, ok := s.str()
		if !ok {
			return false
		}
		s.skipSpace()
		if s.peek() != ':' {
			return s.fail(s.pos, "expected ':' after object key")
		}
		s.pos++
		s.skipSpace()
		if f == nil {
			ok = s.value()
		} else {
			ok = s.member(f, matchKey(key, esc))
		}
		if !ok {
			return false
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			s.depth--
			return true
		default:
			return s.fail(s.pos, "expected ',' or '}' after object value")
		}
	}
}

// member scans the value of a top-level member. A later duplicate key
// overwrites an earlier one, and a non-string value clears it (last wins).
func (s *scanner) member(f *Fields, which field) bool {
	if which == fieldOther {
		return s.value()
	}
	var v string
	isString := s.peek() == '"'
	if isString {
		raw, esc, ok := s.str()
		if !ok {
			return false
		}
		switch {
		case s.dec == nil || esc:
			v = decodeString(raw, esc)
		case which == fieldID:
			v = unsafe.String(unsafe.SliceData(raw), len(raw))
		default:
			v = s.dec.intern(raw)
		}
	} else if !s.value() {
		return false
	}
	if which == fieldID {
		f.ID, f.HasID = v, isString
	} else {
		f.Type, f.HasType = v, isString
	}
	return true
}

func (s *scanner) array() bool {
	if !s.enter() {
		return false
	}
	s.pos++ // '['
	s.skipSpace()
	if s.peek() == ']' {
		s.pos++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
			s.skipSpace()
		case ']':
			s.pos++
			s.depth--
			return true
		default:
			return s.fail(s.pos, "expected ',' or ']' after array element")
		}
	}
}

func (s *scanner) enter() bool {
	s.depth++
	if s.depth > maxDepth {
		return s.fail(s.pos, "nesting deeper than 10000")
	}
	return true
}

// value skips any JSON value starting at the current position.
func (s *scanner) value() bool {
	switch c := s.peek(); {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array()
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '-' || isDigit(c):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.fail(s.pos, "expected a value")
	}
}

func (s *scanner) literal(lit string) bool {
	end := s.pos + len(lit)
	if end > len(s.data) || string(s.data[s.pos:end]) != lit {
		// Point at the first differing byte so the message is useful.
		i := s.pos
		for i < len(s.data) && i < end && s.data[i] == lit[i-s.pos] {
			i++
		}
		return s.fail(i, "invalid literal, expected "+lit)
	}
	s.pos = end
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. Range is not
// checked: any syntactically valid number is accepted, as json.Valid does.
func (s *scanner) number() bool {
	d, i := s.data, s.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && isDigit(d[i]):
		i = skipDigits(d, i)
	default:
		return s.fail(i, "expected digit in number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return s.fail(i, "expected digit after decimal point")
		}
		i = skipDigits(d, i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return s.fail(i, "expected digit in exponent")
		}
		i = skipDigits(d, i)
	}
	s.pos = i
	return true
}

// str scans a string starting at its opening quote and returns the raw bytes
// between the quotes, whether they contain escapes, and success. It checks
// escapes, control bytes and UTF-8 but decodes nothing.
func (s *scanner) str() (raw []byte, escaped bool, ok bool) {
	d := s.data
	start := s.pos + 1
	for i := start; i < len(d); {
		// Eight bytes at a time while none of them needs a look (see
		// special); then byte by byte from the first one that does.
		for i+8 <= len(d) {
			m := special(binary.LittleEndian.Uint64(d[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(d) {
			break
		}
		c := d[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			s.pos = i + 1
			return d[start:i], escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return nil, false, s.fail(len(d), "unterminated escape")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(d) {
						return nil, false, s.fail(len(d), "unterminated \\u escape")
					}
					if !isHex(d[k]) {
						return nil, false, s.fail(k, "invalid hex digit in \\u escape")
					}
				}
				i += 6
			default:
				return nil, false, s.fail(i+1, "invalid escape character")
			}
		case c < 0x20:
			return nil, false, s.fail(i, "control character in string")
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false, s.fail(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return nil, false, s.fail(len(d), "unterminated string")
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special returns a mask whose lowest set bit is the high bit of the first
// (lowest-addressed) byte of the little-endian word x that is not plain:
// '"', '\\', a control byte (< 0x20) or a non-ASCII byte; 0 when all eight
// bytes are plain. Higher bits may be set spuriously (borrows run upwards
// from a flagged byte), so only the lowest one is meaningful.
func special(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	// (v - lsb*k) &^ v has a byte's high bit set when the byte is below k
	// (k <= 0x80): k = 1 finds zero bytes, so '"' and '\\' after the xors.
	// The last term flags the non-ASCII bytes.
	return ((x-lsb*0x20)&^x | (q-lsb)&^q | (b-lsb)&^b | x) & msb
}

// matchKey reports which extracted field a raw object key names.
func matchKey(raw []byte, escaped bool) field {
	if escaped {
		// An escaped "type" is at most 24 raw bytes (four \uXXXX); anything
		// longer cannot decode to a wanted key. Decoding never lengthens the
		// text, so the stack buffer suffices and the check stays
		// allocation-free.
		if len(raw) > 24 {
			return fieldOther
		}
		var buf [24]byte
		raw = appendUnescaped(buf[:0], raw)
	}
	switch string(raw) {
	case "id":
		return fieldID
	case "type":
		return fieldType
	}
	return fieldOther
}

// decodeString returns the Go string for raw string contents already
// validated by str.
func decodeString(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	var buf [64]byte
	return string(appendUnescaped(buf[:0], raw))
}

// appendUnescaped decodes validated string contents the way encoding/json
// does: a surrogate escape that does not form a valid pair with the next
// \u escape becomes U+FFFD and the next escape is decoded on its own.
func appendUnescaped(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		switch e := raw[i+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				next := rune(-1)
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					next = hex4(raw[i+2:])
				}
				if dec := utf16.DecodeRune(r, next); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += 2
	}
	return dst
}

// hex4 decodes four hex digits already checked by str.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && isDigit(d[i]) {
		i++
	}
	return i
}
