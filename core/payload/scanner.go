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
// building them. Its methods take the offset of the token to scan and return
// the offset just past it, or -1 after recording the first fault; Meta turns
// that into an error. Passing the offset rather than keeping it in the struct
// lets it live in a register across the whole scan.
type scanner struct {
	data  []byte
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

// fail records a fault at offset at and returns -1, the scanner's failure
// result.
func (s *scanner) fail(at int, msg string) int {
	s.errAt, s.errMsg = at, msg
	return -1
}

// next skips whitespace from offset i and returns the offset of the next
// byte and the byte itself, or len(d) and 0 at the end of the input. 0 is
// never valid where the byte is tested, so the end takes the caller's fault
// path (as does a NUL byte in the data, which is reported at its offset).
// Returning the byte spares the caller a second bounds check and load.
func next(d []byte, i int) (int, byte) {
	for ; i < len(d); i++ {
		// Most calls find a structural byte at once; one compare rules out
		// whitespace for every byte above ' '.
		if c := d[i]; c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return i, c
		}
	}
	return i, 0
}

// object scans an object starting at its '{' at offset i. At the top level f
// is non-nil and receives the string values of "id" and "type"; nested
// objects pass nil and are only validated.
func (s *scanner) object(i int, f *Fields) int {
	if s.depth++; s.depth > maxDepth {
		return s.fail(i, "nesting deeper than 10000")
	}
	d := s.data
	i, c := next(d, i+1)
	if c == '}' {
		s.depth--
		return i + 1
	}
	for {
		if c != '"' {
			return s.fail(i, "expected object key")
		}
		key := i + 1
		// Most keys are short and plain: find the closing quote inline and
		// call the full scanner only for escapes, UTF-8 or the last bytes.
		esc := false
		if i = skipPlain(d, key); i < len(d) && d[i] == '"' {
			i++
		} else if i, esc = s.strFrom(i); i < 0 {
			return i
		}
		which := fieldOther
		if f != nil {
			which = matchKey(d[key:i-1], esc)
		}
		if i, c = next(d, i); c != ':' {
			return s.fail(i, "expected ':' after object key")
		}
		if i, c = next(d, i+1); c == '"' {
			// Strings are the most common values; scan them as keys are.
			start := i + 1
			esc = false
			if i = skipPlain(d, start); i < len(d) && d[i] == '"' {
				i++
			} else if i, esc = s.strFrom(i); i < 0 {
				return i
			}
			if which != fieldOther {
				s.set(f, which, d[start:i-1], esc)
			}
		} else if i = s.value(i); which != fieldOther {
			// A later duplicate key overrides an earlier one (last wins),
			// so a value that is not a string clears the field.
			f.clear(which)
		}
		if i < 0 {
			return i
		}
		switch i, c = next(d, i); c {
		case ',':
			i, c = next(d, i+1)
		case '}':
			s.depth--
			return i + 1
		default:
			return s.fail(i, "expected ',' or '}' after object value")
		}
	}
}

// set stores raw, the contents of a top-level string, as the field which.
func (s *scanner) set(f *Fields, which field, raw []byte, escaped bool) {
	var v string
	switch {
	case s.dec == nil || escaped:
		v = decodeString(raw, escaped)
	case which == fieldID:
		v = unsafe.String(unsafe.SliceData(raw), len(raw))
	default:
		v = s.dec.intern(raw)
	}
	if which == fieldID {
		f.ID, f.HasID = v, true
	} else {
		f.Type, f.HasType = v, true
	}
}

// clear marks the field which as absent.
func (f *Fields) clear(which field) {
	if which == fieldID {
		f.ID, f.HasID = "", false
	} else {
		f.Type, f.HasType = "", false
	}
}

// array scans an array starting at its '[' at offset i.
func (s *scanner) array(i int) int {
	if s.depth++; s.depth > maxDepth {
		return s.fail(i, "nesting deeper than 10000")
	}
	d := s.data
	i, c := next(d, i+1)
	if c == ']' {
		s.depth--
		return i + 1
	}
	for {
		if c == '"' {
			// Strings inline, as in object.
			if i = skipPlain(d, i+1); i < len(d) && d[i] == '"' {
				i++
			} else {
				i, _ = s.strFrom(i)
			}
		} else {
			i = s.value(i)
		}
		if i < 0 {
			return i
		}
		switch i, c = next(d, i); c {
		case ',':
			i, c = next(d, i+1)
		case ']':
			s.depth--
			return i + 1
		default:
			return s.fail(i, "expected ',' or ']' after array element")
		}
	}
}

// value skips any JSON value starting at offset i.
func (s *scanner) value(i int) int {
	d := s.data
	if i >= len(d) {
		return s.fail(i, "expected a value")
	}
	switch d[i] {
	case '"':
		i, _ = s.str(i)
		return i
	case '{':
		return s.object(i, nil)
	case '[':
		return s.array(i)
	case '1', '2', '3', '4', '5', '6', '7', '8', '9':
		// A plain integer, the common number, needs no call.
		if j := skipDigits(d, i+1); j >= len(d) || (d[j] != '.' && d[j] != 'e' && d[j] != 'E') {
			return j
		}
		return s.number(i)
	case '-', '0':
		return s.number(i)
	// The literals are compared as constants, a single load each.
	case 't':
		if i+4 <= len(d) && string(d[i:i+4]) == "true" {
			return i + 4
		}
		return s.badLiteral(i, "true")
	case 'f':
		if i+5 <= len(d) && string(d[i:i+5]) == "false" {
			return i + 5
		}
		return s.badLiteral(i, "false")
	case 'n':
		if i+4 <= len(d) && string(d[i:i+4]) == "null" {
			return i + 4
		}
		return s.badLiteral(i, "null")
	}
	return s.fail(i, "expected a value")
}

// badLiteral reports where the literal lit starting at offset i goes wrong,
// pointing at the first differing byte so the message is useful.
func (s *scanner) badLiteral(i int, lit string) int {
	d := s.data
	j := i
	for j < len(d) && j < i+len(lit) && d[j] == lit[j-i] {
		j++
	}
	return s.fail(j, "invalid literal, expected "+lit)
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? starting at
// offset i. Range is not checked: any syntactically valid number is
// accepted, as json.Valid does.
func (s *scanner) number(i int) int {
	d := s.data
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
	return i
}

// str scans a string starting at its opening quote at offset i and returns
// the offset past the closing quote and whether the string contains escapes.
// It checks escapes, control bytes and UTF-8 but decodes nothing.
func (s *scanner) str(i int) (int, bool) {
	return s.strFrom(skipPlain(s.data, i+1))
}

// skipPlain returns the offset of the first byte at or after i that is not
// plain, testing eight bytes at a time (see special). It stops early, at
// most seven bytes before the end, where a whole word no longer fits; strFrom
// takes those bytes one by one. It is small enough to inline, so the common
// short plain string costs no call.
func skipPlain(d []byte, i int) int {
	// Written as i < len(d)-7 rather than i+8 <= len(d), the bound lets the
	// compiler drop the word load's length check and slice arithmetic, a
	// third of the loop's instructions.
	for ; i < len(d)-7; i += 8 {
		if m := special(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return i
}

// strFrom finishes scanning a string at offset i, past its opening quote and
// any plain bytes before i (so no escape: an escape sets the result's
// escaped flag). It returns what str does.
func (s *scanner) strFrom(i int) (int, bool) {
	d := s.data
	escaped := false
	for {
		for i < len(d) && plain[d[i]] {
			i++
		}
		if i >= len(d) {
			return s.fail(len(d), "unterminated string"), false
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1, escaped
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return s.fail(len(d), "unterminated escape"), false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(d) {
						return s.fail(len(d), "unterminated \\u escape"), false
					}
					if !isHex(d[k]) {
						return s.fail(k, "invalid hex digit in \\u escape"), false
					}
				}
				i += 6
			default:
				return s.fail(i+1, "invalid escape character"), false
			}
		case c < 0x20:
			return s.fail(i, "control character in string"), false
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return s.fail(i, "invalid UTF-8 in string"), false
			}
			i += size
		}
		i = skipPlain(d, i)
	}
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
	// A byte's high bit survives in x - lsb*k when the byte is below k (it
	// wraps) or is itself non-ASCII. The non-ASCII bytes are flagged anyway
	// by the last term, so that is exact enough. The xor with 0x02 keeps
	// the control bytes below 0x20 and turns '"' into 0x20 (and ' ' into
	// 0x22), so k = 0x21 finds both at once; after the xor with '\\', k = 1
	// finds the zero bytes, which were backslashes. A byte borrows from the
	// one above it only when it is flagged itself.
	return (((x ^ lsb*0x02) - lsb*0x21) | ((x ^ lsb*'\\') - lsb) | x) & msb
}

// matchKey reports which extracted field a raw object key names. It is small
// enough to inline; escaped keys, which are rare, take a call.
func matchKey(raw []byte, escaped bool) field {
	if escaped {
		return matchEscapedKey(raw)
	}
	switch string(raw) {
	case "id":
		return fieldID
	case "type":
		return fieldType
	}
	return fieldOther
}

// matchEscapedKey is matchKey for a key with escapes.
func matchEscapedKey(raw []byte) field {
	// An escaped "type" is at most 24 raw bytes (four \uXXXX); anything
	// longer cannot decode to a wanted key. Decoding never lengthens the
	// text, so the stack buffer suffices and the check stays
	// allocation-free.
	if len(raw) > 24 {
		return fieldOther
	}
	var buf [24]byte
	return matchKey(appendUnescaped(buf[:0], raw), false)
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
