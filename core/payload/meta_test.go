package payload

import (
	"errors"
	"math/bits"
	"strings"
	"testing"
)

func TestMeta(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Fields
		invalid bool
	}{
		{name: "both fields", in: `{"id":"e-1","type":"user.created"}`,
			want: Fields{ID: "e-1", Type: "user.created", HasID: true, HasType: true}},
		{name: "no fields", in: `{"a":1}`},
		{name: "empty object", in: `{}`},
		{name: "empty strings count as present", in: `{"id":"","type":""}`,
			want: Fields{HasID: true, HasType: true}},
		{name: "whitespace everywhere", in: " \t\r\n{ \"type\" \n:\t\"x\" , \"id\" : \"y\" }\n ",
			want: Fields{ID: "y", Type: "x", HasID: true, HasType: true}},
		{name: "escaped value", in: `{"type":"\u0041\n\"\\\/\b\f\r\t"}`,
			want: Fields{Type: "A\n\"\\/\b\f\r\t", HasType: true}},
		{name: "escaped key", in: `{"\u0069d":"x","t\u0079pe":"y"}`,
			want: Fields{ID: "x", Type: "y", HasID: true, HasType: true}},
		{name: "surrogate pair", in: `{"id":"\ud83d\ude00"}`, want: Fields{ID: "😀", HasID: true}},
		{name: "lone surrogate becomes U+FFFD", in: `{"id":"a\ud800b"}`, want: Fields{ID: "a\uFFFDb", HasID: true}},
		{name: "high then non-low surrogate", in: `{"id":"\ud800\u0041"}`, want: Fields{ID: "\uFFFDA", HasID: true}},
		{name: "raw UTF-8", in: `{"type":"übung.ß"}`, want: Fields{Type: "übung.ß", HasType: true}},
		{name: "long escaped value", in: `{"id":"` + strings.Repeat(`\u00e9`, 40) + `"}`,
			want: Fields{ID: strings.Repeat("é", 40), HasID: true}},
		{name: "key case matters", in: `{"ID":"x","Type":"y"}`},
		{name: "key with escaped extra", in: `{"id\u0000":"x"}`},
		{name: "number id absent", in: `{"id":42,"type":"t"}`, want: Fields{Type: "t", HasType: true}},
		{name: "null type absent", in: `{"type":null}`},
		{name: "object type absent", in: `{"type":{"type":"x"}}`},
		{name: "array id absent", in: `{"id":["x"]}`},
		{name: "bool id absent", in: `{"id":true}`},
		{name: "nested id ignored", in: `{"data":{"id":"inner","type":"inner"},"x":[{"id":"a"}]}`},
		{name: "nested then top", in: `{"data":{"id":"inner"},"id":"outer"}`, want: Fields{ID: "outer", HasID: true}},
		{name: "duplicate key last wins", in: `{"id":"a","id":"b"}`, want: Fields{ID: "b", HasID: true}},
		{name: "duplicate key non-string clears", in: `{"id":"a","id":1}`},
		{name: "duplicate key string after non-string", in: `{"type":1,"type":"b"}`, want: Fields{Type: "b", HasType: true}},
		{name: "top-level array", in: `[{"id":"x"}]`},
		{name: "top-level number", in: `12.5e-3`},
		{name: "top-level string", in: `"id"`},
		{name: "top-level null", in: `null`},
		{name: "top-level true", in: ` true `},
		{name: "numbers", in: `{"a":[0,-0,1.5,-2e10,3E+2,4e-1,123456789012345678901234567890,1e400]}`},

		{name: "empty", in: ``, invalid: true},
		{name: "only whitespace", in: "  \n", invalid: true},
		{name: "truncated object", in: `{"id":"x"`, invalid: true},
		{name: "truncated string", in: `{"id":"x`, invalid: true},
		{name: "truncated escape", in: `{"id":"\u00`, invalid: true},
		{name: "trailing garbage", in: `{"id":"x"} x`, invalid: true},
		{name: "two documents", in: `{} {}`, invalid: true},
		{name: "trailing comma object", in: `{"a":1,}`, invalid: true},
		{name: "trailing comma array", in: `[1,]`, invalid: true},
		{name: "missing colon", in: `{"a" 1}`, invalid: true},
		{name: "unquoted key", in: `{id:"x"}`, invalid: true},
		{name: "single quotes", in: `{'id':'x'}`, invalid: true},
		{name: "bad escape", in: `{"id":"\x"}`, invalid: true},
		{name: "bad hex", in: `{"id":"\u12g4"}`, invalid: true},
		{name: "control char", in: "{\"id\":\"a\tb\"}", invalid: true},
		{name: "leading zero", in: `{"a":01}`, invalid: true},
		{name: "bare minus", in: `-`, invalid: true},
		{name: "dot without digits", in: `1.`, invalid: true},
		{name: "exponent without digits", in: `1e+`, invalid: true},
		{name: "bad literal", in: `{"a":tru}`, invalid: true},
		{name: "NaN", in: `NaN`, invalid: true},
		{name: "invalid UTF-8 in string", in: "{\"id\":\"\xff\"}", invalid: true},
		{name: "invalid UTF-8 outside string", in: "{\xc3\xa9:1}", invalid: true},
		{name: "BOM", in: "\ufeff{}", invalid: true},
		{name: "bad value after id", in: `{"id":"x","type":}`, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Meta([]byte(tt.in))
			// A Decoder, fresh or with its cache filled, must agree.
			var dec Decoder
			for range 2 {
				dgot, derr := dec.Meta([]byte(tt.in))
				if dgot != got || (derr == nil) != (err == nil) {
					t.Fatalf("Decoder.Meta(%q) = %+v, %v; Meta = %+v, %v", tt.in, dgot, derr, got, err)
				}
			}
			if tt.invalid {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Meta(%q) error = %v, want ErrInvalid", tt.in, err)
				}
				if got != (Fields{}) {
					t.Errorf("Meta(%q) = %+v on error, want zero Fields", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Meta(%q) error = %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Meta(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestMetaNull(t *testing.T) {
	if _, err := Meta(nil); !errors.Is(err, ErrNull) {
		t.Fatalf("Meta(nil) error = %v, want ErrNull", err)
	}
	// An empty but non-null value is not a tombstone.
	if _, err := Meta([]byte{}); !errors.Is(err, ErrInvalid) || errors.Is(err, ErrNull) {
		t.Fatalf("Meta(empty) error = %v, want ErrInvalid only", err)
	}
}

// TestMetaDepth pins the nesting limit to encoding/json's: 10000 levels are
// valid, 10001 are not.
func TestMetaDepth(t *testing.T) {
	tests := []struct {
		depth int
		valid bool
	}{{10000, true}, {10001, false}}
	for _, tt := range tests {
		for _, open := range []string{"[", `{"a":`} {
			closeCh := "]"
			if open != "[" {
				closeCh = "}"
			}
			doc := strings.Repeat(open, tt.depth) + "1" + strings.Repeat(closeCh, tt.depth)
			_, err := Meta([]byte(doc))
			if (err == nil) != tt.valid {
				t.Errorf("depth %d of %q: error = %v, want valid=%v", tt.depth, open, err, tt.valid)
			}
		}
	}
}

func TestMetaErrorMessage(t *testing.T) {
	_, err := Meta([]byte(`{"id":x}`))
	if err == nil || !strings.Contains(err.Error(), "offset 6") {
		t.Fatalf("error = %v, want it to name offset 6", err)
	}
	_, err = Meta([]byte(`{"id":"x`))
	if err == nil || !strings.Contains(err.Error(), "unexpected end") {
		t.Fatalf("error = %v, want unexpected end", err)
	}
}

func TestMetaAllocs(t *testing.T) {
	p := []byte(benchPayload)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Meta(p); err != nil {
			t.Fatal(err)
		}
	})
	// One string each for id and type, nothing else.
	if allocs > 2 {
		t.Errorf("Meta allocates %v times per call, want <= 2", allocs)
	}
	noFields := []byte(`{"a":[1,2,{"b":"c"}],"d":"e"}`)
	if allocs := testing.AllocsPerRun(100, func() { _, _ = Meta(noFields) }); allocs != 0 {
		t.Errorf("Meta without fields allocates %v times per call, want 0", allocs)
	}
}

func TestDecoderAllocs(t *testing.T) {
	p := []byte(benchPayload)
	var dec Decoder
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := dec.Meta(p); err != nil {
			t.Fatal(err)
		}
	})
	// The id shares the payload and the type comes from the cache.
	if allocs != 0 {
		t.Errorf("Decoder.Meta allocates %v times per call, want 0", allocs)
	}
}

// TestDecoderCache checks that the type cache returns equal strings as
// entries are replaced, and that a shared id follows the payload's bytes.
func TestDecoderCache(t *testing.T) {
	var dec Decoder
	for round := range 3 {
		for i := range 3 * typeCache {
			typ := "type." + strings.Repeat("x", i)
			f, err := dec.Meta([]byte(`{"type":"` + typ + `","id":"i"}`))
			if err != nil || f.Type != typ || !f.HasType || f.ID != "i" {
				t.Fatalf("round %d, type %q: got %+v, %v", round, typ, f, err)
			}
		}
	}
	long := strings.Repeat("y", 100)
	for range 2 {
		if f, _ := dec.Meta([]byte(`{"type":"` + long + `"}`)); f.Type != long {
			t.Fatalf("long type: got %q", f.Type)
		}
	}
}

// TestSpecial checks the eight-byte scan against the byte table for every
// byte value in every lane, alone and behind a lower flagged byte.
func TestSpecial(t *testing.T) {
	for lane := range 8 {
		for c := range 256 {
			var w [8]byte
			for i := range w {
				w[i] = 'a'
			}
			w[lane] = byte(c)
			m := special(leWord(w))
			want := !plain[c]
			if got := m != 0; got != want {
				t.Fatalf("byte %#x in lane %d: flagged %v, want %v", c, lane, got, want)
			}
			if want && bits.TrailingZeros64(m)>>3 != lane {
				t.Fatalf("byte %#x in lane %d: first flagged lane %d", c, lane, bits.TrailingZeros64(m)>>3)
			}
			// Any byte above the first flagged one must not move it.
			for low := range lane {
				for _, f := range []byte{0, 0x1f, '"', '\\', 0x80, 0xff} {
					v := w
					v[low] = f
					if got := bits.TrailingZeros64(special(leWord(v))) >> 3; got != low {
						t.Fatalf("bytes %#x@%d, %#x@%d: first flagged lane %d", f, low, c, lane, got)
					}
				}
			}
		}
	}
}

func leWord(w [8]byte) uint64 {
	var x uint64
	for i := 7; i >= 0; i-- {
		x = x<<8 | uint64(w[i])
	}
	return x
}

// TestMetaErrors pins the error text, offsets included, for faults in every
// part of the grammar.
func TestMetaErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "unexpected end of input (expected a value)"},
		{"  ", "unexpected end of input (expected a value)"},
		{"{", "unexpected end of input (expected object key)"},
		{`{"a"`, "unexpected end of input (expected ':' after object key)"},
		{`{"a":`, "unexpected end of input (expected a value)"},
		{`{"a":1`, "unexpected end of input (expected ',' or '}' after object value)"},
		{`{"a":1,`, "unexpected end of input (expected object key)"},
		{`{"a":1,}`, "expected object key at offset 7 (byte '}')"},
		{`{"a" 1}`, "expected ':' after object key at offset 5 (byte '1')"},
		{`{1:2}`, "expected object key at offset 1 (byte '1')"},
		{`{"a":1 "b":2}`, `expected ',' or '}' after object value at offset 7 (byte '"')`},
		{"[", "unexpected end of input (expected a value)"},
		{"[1", "unexpected end of input (expected ',' or ']' after array element)"},
		{"[1,]", "expected a value at offset 3 (byte ']')"},
		{"[1 2]", "expected ',' or ']' after array element at offset 3 (byte '2')"},
		{"]", "expected a value at offset 0 (byte ']')"},
		{`{"a":x}`, "expected a value at offset 5 (byte 'x')"},
		{`{"a":tru}`, "invalid literal, expected true at offset 8 (byte '}')"},
		{`{"a":nul`, "unexpected end of input (invalid literal, expected null)"},
		{`{"a":fals}`, "invalid literal, expected false at offset 9 (byte '}')"},
		{"-", "unexpected end of input (expected digit in number)"},
		{"-a", "expected digit in number at offset 1 (byte 'a')"},
		{"01", "data after top-level value at offset 1 (byte '1')"},
		{"1.", "unexpected end of input (expected digit after decimal point)"},
		{"1.e5", "expected digit after decimal point at offset 2 (byte 'e')"},
		{"1e", "unexpected end of input (expected digit in exponent)"},
		{"1e+", "unexpected end of input (expected digit in exponent)"},
		{"1ex", "expected digit in exponent at offset 2 (byte 'x')"},
		{`"abc`, "unexpected end of input (unterminated string)"},
		{`"\`, "unexpected end of input (unterminated escape)"},
		{`"\u12`, `unexpected end of input (unterminated \u escape)`},
		{`"\u12g4"`, `invalid hex digit in \u escape at offset 5 (byte 'g')`},
		{`"\x"`, "invalid escape character at offset 2 (byte 'x')"},
		{"\"a\tb\"", `control character in string at offset 2 (byte '\t')`},
		{"\"\xff\"", "invalid UTF-8 in string at offset 1 (byte 'ÿ')"},
		{"\"\xc3\"", "invalid UTF-8 in string at offset 1 (byte 'Ã')"},
		{"{} {}", "data after top-level value at offset 3 (byte '{')"},
		{"1 2", "data after top-level value at offset 2 (byte '2')"},
		{"{\"a\":1}\x00", `data after top-level value at offset 7 (byte '\x00')`},
		{"\x00", `expected a value at offset 0 (byte '\x00')`},
		{`{"id":"x`, "unexpected end of input (unterminated string)"},
		{"{\"type\":\"\x01\"}", `control character in string at offset 9 (byte '\x01')`},
		{`{"id":"0123456789abcdef`, "unexpected end of input (unterminated string)"},
		{`{"k":"0123456789abcdefgh\"}`, "unexpected end of input (unterminated string)"},
	}
	for _, tt := range tests {
		_, err := Meta([]byte(tt.in))
		if want := ErrInvalid.Error() + ": " + tt.want; err == nil || err.Error() != want {
			t.Errorf("Meta(%q) error = %v, want %s", tt.in, err, want)
		}
	}
}

// TestMetaSweep moves a byte that needs a look (the closing quote, an
// escape, non-ASCII, a control byte) through every offset of strings of
// many lengths, so that it lands in every lane of the eight-byte scan and in
// the bytes after the last whole word, and checks the result against
// encoding/json.
func TestMetaSweep(t *testing.T) {
	specials := []string{`"`, `\n`, `\u00e9`, `\"`, "é", "😀", "\x01", "\x7f", "\xff", "\xc3", `\`}
	for n := range 24 {
		for k := 0; k <= n; k++ {
			for _, sp := range specials {
				str := strings.Repeat("a", k) + sp + strings.Repeat("b", n-k)
				for _, doc := range []string{
					`{"id":"` + str + `","type":"t"}`,
					`{"type":"` + str + `"}`,
					`{"x":["` + str + `"],"id":"` + str + `"}`,
					`{"` + str + `":1}`,
				} {
					for cut := len(doc) - 3; cut <= len(doc); cut++ {
						checkReference(t, []byte(doc[:cut]))
					}
				}
			}
		}
	}
}

// checkReference checks Meta and a Decoder against encoding/json (see
// reference in fuzz_test.go).
func checkReference(t *testing.T, p []byte) {
	t.Helper()
	got, err := Meta(p)
	want, valid := reference(p)
	if valid != (err == nil) || got != want {
		t.Fatalf("Meta(%q) = %+v, %v; reference %+v, valid %v", p, got, err, want, valid)
	}
	var dec Decoder
	for range 2 {
		if dgot, derr := dec.Meta(p); dgot != got || (derr == nil) != (err == nil) {
			t.Fatalf("Decoder.Meta(%q) = %+v, %v; Meta = %+v, %v", p, dgot, derr, got, err)
		}
	}
}
