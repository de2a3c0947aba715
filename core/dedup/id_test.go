package dedup

import (
	"encoding/hex"
	"testing"

	"github.com/prosody-events/prosody-go/core/event"
)

// The ids the original (prosody-events 0.4.0) wrote to its deduplication
// table for two messages it handled in group "oracle-g", version "1":
// ours must be the same bytes, or the two would not share the table.
func TestMessageIDMatchesTheOriginal(t *testing.T) {
	const topic = "oracle-t-8649"
	tests := []struct {
		name string
		msg  event.Message
		want string
	}{
		{"with an event id", event.Message{Topic: topic, Partition: 0, Offset: 0, Key: "key-with-id", ID: "abc-1", HasID: true},
			"4a915e42414d87c68acca7af90f0c1bb"},
		{"without one: by offset", event.Message{Topic: topic, Partition: 0, Offset: 1, Key: "key-no-id"},
			"a8b62d315ffd835a887126ff725deacb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := MessageID("1", "oracle-g", &tt.msg)
			if got := hex.EncodeToString(id[:]); got != tt.want {
				t.Fatalf("id %s, want %s", got, tt.want)
			}
		})
	}
}

// Every field is part of the id: changing any one of them gives another.
func TestMessageIDDependsOnEveryField(t *testing.T) {
	base := event.Message{Topic: "t", Partition: 1, Offset: 5, Key: "k", ID: "e", HasID: true}
	ref := MessageID("1", "g", &base)
	variants := map[string]func() ID{
		"version":   func() ID { return MessageID("2", "g", &base) },
		"group":     func() ID { return MessageID("1", "h", &base) },
		"topic":     func() ID { m := base; m.Topic = "u"; return MessageID("1", "g", &m) },
		"partition": func() ID { m := base; m.Partition = 2; return MessageID("1", "g", &m) },
		"key":       func() ID { m := base; m.Key = "j"; return MessageID("1", "g", &m) },
		"event id":  func() ID { m := base; m.ID = "f"; return MessageID("1", "g", &m) },
		"no id":     func() ID { m := base; m.HasID = false; return MessageID("1", "g", &m) },
		"an empty id is an id": func() ID {
			m := base
			m.ID = ""
			return MessageID("1", "g", &m)
		},
	}
	for name, f := range variants {
		if f() == ref {
			t.Errorf("changing the %s kept the id", name)
		}
	}
	m := base
	m.Offset = 99
	if MessageID("1", "g", &m) != ref {
		t.Error("with an event id the offset must not matter")
	}
	if a, b := (event.Message{Topic: "ab", Key: "c"}), (event.Message{Topic: "a", Key: "bc"}); MessageID("1", "g", &a) == MessageID("1", "g", &b) {
		t.Error("the length prefixes must keep fields apart")
	}
}

func BenchmarkMessageID(b *testing.B) {
	m := event.Message{Topic: "orders", Partition: 3, Offset: 42, Key: "customer-1234", ID: "2f1c7a9e-1111-4c3b-9f00-123456789abc", HasID: true}
	for b.Loop() {
		_ = MessageID("1", "my-group", &m)
	}
}
