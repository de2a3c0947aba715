package config

import (
	"strings"
	"testing"
)

func TestCheckTopicName(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string // "" when valid, else a part of the error
	}{
		{"orders", ""},
		{"a.b_c-D9", ""},
		{strings.Repeat("x", 249), ""},
		{"", `topic "": must not be empty`},
		{".", "is not allowed"},
		{"..", "is not allowed"},
		{"...", ""},
		{strings.Repeat("x", 250), "is 250 bytes long"},
		{"t\x00other", `has "\x00" at byte 1`},
		{"a b", `has " " at byte 1`},
		{"é", `has "\xc3" at byte 0`},
		{"a/b", `has "/" at byte 1`},
	} {
		err := CheckTopicName(tt.name)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckTopicName(%q) = %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckTopicName(%q) = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestTopicOptionsAreChecked(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{`{"subscribed_topics":["ok","b a"]}`, `subscribed_topics: entry topic "b a"`},
		{`{"bootstrap_servers":"k:9092","subscribed_topics":"^a b.*"}`, ""}, // a pattern, not a name
		{`{"failure_topic":"t\u0000x"}`, `failure_topic: has "\x00" at byte 1`},
		{`{"telemetry_topic":".."}`, "telemetry_topic: is not allowed"},
	} {
		_, err := FromJSON([]byte(tt.doc))
		if tt.want == "" {
			if err != nil {
				t.Errorf("FromJSON(%s) = %v, want nil", tt.doc, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("FromJSON(%s) = %v, want an error containing %q", tt.doc, err, tt.want)
		}
	}
}
