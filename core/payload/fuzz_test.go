package payload

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// reference computes Meta's contract with encoding/json: validity is
// json.Valid plus UTF-8, and the fields come from decoding the document into
// a map (exact keys, last duplicate wins) and keeping only string values.
func reference(p []byte) (Fields, bool) {
	if !json.Valid(p) || !utf8.Valid(p) {
		return Fields{}, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil {
		return Fields{}, true // valid, but not an object
	}
	var f Fields
	f.ID, f.HasID = refString(m["id"])
	f.Type, f.HasType = refString(m["type"])
	return f, true
}

func refString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		panic("valid JSON string failed to decode: " + err.Error())
	}
	return s, true
}

func FuzzMeta(f *testing.F) {
	for _, seed := range []string{
		benchPayload,
		`{"id":"a","type":"b"}`,
		`{"id":1,"type":null}`,
		`{"\u0069d":"\ud83d\ude00","type":"\ud800x"}`,
		`{"id":"a","id":"b","ID":"c"}`,
		`[{"id":"x"}]`,
		`{"a":{"id":"x"}}`,
		`-0.5e+7`,
		`{"id":"x"} junk`,
		`{"id":"x",}`,
		"{\"id\":\"\xff\"}",
		`{"type":"\"\\\/\b\f\n\r\t"}`,
		``,
		// The eight-byte string scan and the bytes after the last word.
		`{"id":"0123456789abcdefé","type":"0123456\u0041"}`,
		`{"pad":"0123456789abcdef\"}`,
		"{\"k\":\"01234567\x01\"}",
		" {\n\t\"id\" : \"x\" ,\r\n \"type\":[ 1 , 2.5e-3 ,true,false,null ] } ",
		`{"n":[0,-0,12,-12,1.5,1e5,1E+5,1e-5,01]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Add([]byte(enginePayload))
	f.Fuzz(func(t *testing.T, p []byte) {
		got, err := Meta(p)
		want, valid := reference(p)
		if valid != (err == nil) {
			t.Fatalf("Meta(%q) error = %v, reference valid = %v", p, err, valid)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Meta(%q) error = %v, want ErrInvalid", p, err)
		}
		if got != want {
			t.Fatalf("Meta(%q) = %+v, reference %+v", p, got, want)
		}
		var dec Decoder
		for range 2 {
			if dgot, derr := dec.Meta(p); dgot != got || (derr == nil) != (err == nil) {
				t.Fatalf("Decoder.Meta(%q) = %+v, %v; Meta = %+v, %v", p, dgot, derr, got, err)
			}
		}
	})
}
