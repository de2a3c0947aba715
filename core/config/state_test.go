package config

import (
	"reflect"
	"testing"
	"time"
)

// The messages come from the bindings' documented list and must not drift.
func TestStateCollectionErrors(t *testing.T) {
	tests := []struct {
		name        string
		collections string
		extra       map[string]string
		want        string
	}{
		{"not an object", `[5]`, nil, "state_collections[0]: must be an object, got 5"},
		{"not a list", `{"name":"a"}`, nil, "state_collections: must be a list of collection definitions, got an object"},
		{"empty name", `[{"name":"","kind":"value","payload":"json"}]`, nil,
			"state_collections[0].name: must not be empty"},
		{"duplicate name", `[{"name":"x","kind":"value","payload":"json"},{"name":"x","kind":"map","payload":"json"}]`, nil,
			`state_collections[1].name: duplicate collection name "x"`},
		{"missing name", `[{"kind":"value","payload":"json"}]`, nil, "state_collections[0].name: missing"},
		{"missing kind", `[{"name":"a","payload":"json"}]`, nil, "state_collections[0].kind: missing"},
		{"null payload", `[{"name":"a","kind":"value","payload":null}]`, nil, "state_collections[0].payload: missing"},
		{"bad kind", `[{"name":"a","kind":"set","payload":"json"}]`, nil,
			`state_collections[0].kind: expected "value", "map", or "deque", got "set"`},
		{"kind not a string", `[{"name":"a","kind":1,"payload":"json"}]`, nil,
			`state_collections[0].kind: expected "value", "map", or "deque", got 1`},
		{"bad payload", `[{"name":"a","kind":"value","payload":"xml"}]`, nil,
			`state_collections[0].payload: expected "json" or "message", got "xml"`},
		{"ttl zero", `[{"name":"a","kind":"value","payload":"json","ttl_seconds":0}]`, nil,
			"state_collections[0].ttl_seconds: must be a whole number in 1..=630720000"},
		{"ttl fraction", `[{"name":"a","kind":"value","payload":"json","ttl_seconds":60.5}]`, nil,
			"state_collections[0].ttl_seconds: must be a whole number in 1..=630720000"},
		{"ttl too long", `[{"name":"a","kind":"value","payload":"json","ttl_seconds":630720001}]`, nil,
			"state_collections[0].ttl_seconds: must be a whole number in 1..=630720000"},
		{"ttl not above recovery delay", `[{"name":"a","kind":"value","payload":"json","ttl_seconds":30}]`, nil,
			"state_collections[0].ttl_seconds: must be greater than state_recovery_delay (30s), got 30"},
		{"keyset limit too big", `[{"name":"a","kind":"map","payload":"json","keyset_limit":4097}]`, nil,
			"state_collections[0].keyset_limit: must be a whole number in 0..=4096"},
		{"keyset limit fraction", `[{"name":"a","kind":"map","payload":"json","keyset_limit":2.5}]`, nil,
			"state_collections[0].keyset_limit: must be a whole number in 0..=4096"},
		{"keyset limit on a deque", `[{"name":"a","kind":"deque","payload":"json","keyset_limit":1}]`, nil,
			"state_collections[0].keyset_limit: only valid for map collections"},
		{"capacity zero", `[{"name":"a","kind":"deque","payload":"json","capacity":0}]`, nil,
			"state_collections[0].capacity: must be a whole number in 1..=4294967295"},
		{"capacity too big", `[{"name":"a","kind":"deque","payload":"json","capacity":4294967296}]`, nil,
			"state_collections[0].capacity: must be a whole number in 1..=4294967295"},
		{"capacity on a map", `[{"name":"a","kind":"map","payload":"message","capacity":5}]`, nil,
			"state_collections[0].capacity: only valid for deque collections"},
		{"unknown field", `[{"name":"a","kind":"value","payload":"json","ttl":5}]`, nil,
			"state_collections[0].ttl: unknown field"},
		{"read_uncommitted not a bool", `[{"name":"a","kind":"value","payload":"json","read_uncommitted":"yes"}]`, nil,
			`state_collections[0].read_uncommitted: must be true or false, got "yes"`},
		{"recovery delay zero", `[]`, map[string]string{"state_recovery_delay": `0`},
			"state_recovery_delay: must be >= 1 second"},
		{"recovery delay negative", `[]`, map[string]string{"state_recovery_delay": `-3`},
			"state_recovery_delay: must be >= 1 second"},
		{"recovery delay fraction", `[]`, map[string]string{"state_recovery_delay": `2.5`},
			"state_recovery_delay: must be a whole number of seconds"},
		{"cache size zero", `[]`, map[string]string{"state_cache_size_bytes": `0`},
			"state_cache_size_bytes: must be greater than 0"},
		{"cache size bool", `[]`, map[string]string{"state_cache_size_bytes": `true`},
			"state_cache_size_bytes: must be an integer in 1..=18446744073709551615"},
		{"cache size negative", `[]`, map[string]string{"state_cache_size_bytes": `-1`},
			"state_cache_size_bytes: must be an integer in 1..=18446744073709551615"},
		{"cache size 2^64", `[]`, map[string]string{"state_cache_size_bytes": `18446744073709551616`},
			"state_cache_size_bytes: must be an integer in 1..=18446744073709551615"},
		{"published without subsystem", `[{"name":"a","kind":"value","payload":"json","published":true}]`, nil,
			"state_collections[0].published: a published collection needs a subsystem (the subsystem option or PROSODY_SUBSYSTEM)"},
		{"published message collection", `[{"name":"a","kind":"map","payload":"message","published":true}]`,
			map[string]string{"subsystem": `"s"`}, "state_collections[0].published: only JSON collections can be published"},
		{"read cache true", `[{"name":"a","kind":"value","payload":"json","read_cache":true}]`, nil,
			`state_collections[0].read_cache: must be {"ttl_ms": n} or false, got true`},
		{"read cache fraction", `[{"name":"a","kind":"value","payload":"json","read_cache":{"ttl_ms":1.5}}]`, nil,
			`state_collections[0].read_cache: must be {"ttl_ms": n} with a whole number of milliseconds n >= 0, or false`},
		{"cache dir empty", `[]`, map[string]string{"state_cache_dir": `""`},
			"state_cache_dir: must not be an empty string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			raw := withBase(tc.extra)
			raw["state_collections"] = tc.collections
			_, err := FromJSON(options(t, raw))
			if err == nil {
				t.Fatalf("expected %q", tc.want)
			}
			for _, e := range optionErrors(t, err) {
				if e.Error() == tc.want {
					return
				}
			}
			t.Errorf("no error reading exactly %q in:\n%v", tc.want, err)
		})
	}
}

func TestStateCollectionsParse(t *testing.T) {
	clearEnv(t)
	raw := withBase(map[string]string{"state_collections": `[
		{"name":"v","kind":"value","payload":"json","ttl_seconds":null,"read_uncommitted":null,"keyset_limit":null,"capacity":null},
		{"name":"m","kind":"map","payload":"message","ttl_seconds":3600,"read_uncommitted":true,"keyset_limit":0,"capacity":null},
		{"name":"d","kind":"deque","payload":"json","capacity":4294967295}
	]`})
	cfg, err := FromJSON(options(t, raw))
	if err != nil {
		t.Fatal(err)
	}
	want := []StateCollection{
		{Name: "v", Kind: CollectionValue, Payload: PayloadJSON},
		{Name: "m", Kind: CollectionMap, Payload: PayloadMessage, TTL: Some(time.Hour), ReadUncommitted: true, KeysetLimit: Some(0)},
		{Name: "d", Kind: CollectionDeque, Payload: PayloadJSON, Capacity: Some[int64](4294967295)},
	}
	if !reflect.DeepEqual(cfg.StateCollections, want) {
		t.Errorf("got %+v\nwant %+v", cfg.StateCollections, want)
	}
	if got := cfg.StateCollections[0].KeysetLimitOrDefault(); got != DefaultKeysetLimit {
		t.Errorf("default keyset limit %d", got)
	}
	if got := cfg.StateCollections[1].KeysetLimitOrDefault(); got != 0 {
		t.Errorf("keyset limit %d, want 0", got)
	}
}

func TestStateTTLRuleSkippedInMock(t *testing.T) {
	clearEnv(t)
	raw := withBase(map[string]string{
		"mock":              `true`,
		"state_collections": `[{"name":"a","kind":"value","payload":"json","ttl_seconds":5}]`,
	})
	if _, err := FromJSON(options(t, raw)); err != nil {
		t.Fatal(err)
	}
}

func TestStateRecoveryDelayFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("PROSODY_STATE_RECOVERY_DELAY", "1500ms")
	_, err := FromJSON(options(t, withBase(nil)))
	requireOptionError(t, err, "state_recovery_delay",
		"state_recovery_delay: must be a whole number of seconds (from PROSODY_STATE_RECOVERY_DELAY)")
}

func TestStateCollectionsFromGo(t *testing.T) {
	clearEnv(t)
	_, err := Load(func(c *Config) {
		c.BootstrapServers = []string{"k:1"}
		c.StateCollections = []StateCollection{
			{Name: "a", Kind: CollectionValue, Payload: PayloadJSON, TTL: Some(1500 * time.Millisecond)},
		}
	})
	requireOptionError(t, err, "state_collections", "state_collections[0].ttl_seconds: must be a whole number in 1..=630720000")
}
