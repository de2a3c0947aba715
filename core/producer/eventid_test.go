package producer

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestEventID(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    string
		wantOK  bool
	}{
		{"simple", `{"id":"abc"}`, "abc", true},
		{"spaces", " \n{ \"id\" :\t\"abc\" } ", "abc", true},
		{"after other fields", `{"type":"x","n":1.5e3,"ok":true,"z":null,"id":"42"}`, "42", true},
		{"nested objects skipped", `{"a":{"id":"inner","b":[1,{"id":"deep"}]},"id":"outer"}`, "outer", true},
		{"only nested id", `{"a":{"id":"inner"}}`, "", false},
		{"brackets in strings", `{"a":"}]{[\"","b":["}"],"id":"x"}`, "x", true},
		{"escaped id value", `{"id":"a\"b\\c\u00e9\n"}`, "a\"b\\c\u00e9\n", true},
		{"escaped key", `{"\u0069d":"x"}`, "x", true},
		{"empty id", `{"id":""}`, "", true},
		{"unicode id", `{"id":"日本"}`, "日本", true},
		{"numeric id", `{"id":42}`, "", false},
		{"object id", `{"id":{"v":"x"}}`, "", false},
		{"null id", `{"id":null}`, "", false},
		{"array id", `{"id":["x"]}`, "", false},
		{"case matters", `{"ID":"x","Id":"y"}`, "", false},
		{"last wins", `{"id":"first","id":"second"}`, "second", true},
		{"later non-string wins", `{"id":"first","id":7}`, "", false},
		{"later string wins", `{"id":7,"id":"second"}`, "second", true},
		{"no id", `{"type":"x"}`, "", false},
		{"empty object", `{}`, "", false},
		{"array payload", `[{"id":"x"}]`, "", false},
		{"string payload", `"id"`, "", false},
		{"empty payload", ``, "", false},
		{"truncated", `{"id":"x`, "", false},
		{"truncated after id", `{"id":"x",`, "", false},
		{"missing colon", `{"id" "x"}`, "", false},
		{"trailing backslash", `{"id":"x\`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := eventID([]byte(tt.payload))
			if string(got) != tt.want || ok != tt.wantOK {
				t.Errorf("eventID(%s) = %q, %v; want %q, %v", tt.payload, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// referenceEventID is the slow, obviously right version: decode the whole
// top level and look "id" up exactly.
func referenceEventID(payload []byte) (string, bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil {
		return "", false
	}
	raw, ok := top["id"]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return "", false
	}
	return id, true
}

// For every valid JSON document the scanner agrees with the reference.
func FuzzEventID(f *testing.F) {
	for _, s := range []string{
		`{"id":"abc"}`, `{"a":{"id":"x"},"id":"y"}`, `{"id":1}`, `[1,2]`, `{"id":"a\u0062"}`,
		`{"\u0069d":"x"}`, `{"x":"}\"{","id":"q"}`, `{"id":"a","id":null}`, `"s"`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		// Invalid UTF-8 is excluded: encoding/json replaces it while
		// the original's decoder rejects the payload; neither is a
		// payload a JSON encoder produces.
		if !json.Valid(payload) || !utf8.Valid(payload) {
			return
		}
		got, ok := eventID(payload)
		want, wantOK := referenceEventID(payload)
		if string(got) != want || ok != wantOK {
			t.Errorf("eventID(%s) = %q, %v; reference %q, %v", payload, got, ok, want, wantOK)
		}
	})
}
