package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzFromJSON feeds arbitrary documents to the JSON configuration: it
// never panics, a document it accepts gives a configuration that
// validates, and every error names an option (or says the document itself
// is not an object of options) so a user knows what to fix.
func FuzzFromJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"bootstrap_servers":"localhost:9094","group_id":"g","subscribed_topics":"t","mock":true}`,
		`{"max_concurrency":-1,"mode":"fast","probe_port":null,"send_timeout":"1.5s"}`,
		`{"subscribed_topics":["^a.*","b","t\u0000x"],"failure_topic":"..","telemetry_topic":""}`,
		`{"state_collections":[{"name":"a","kind":"value","payload":"json","ttl_seconds":3600}]}`,
		`{"timeout":1e400,"retry_base":-0,"max_uncommitted":65536,"defer_failure_threshold":"NaN"}`,
		`{"cassandra_nodes":"[::1]:9042,host:0","cassandra_keyspace":"bad-name"}`,
		`[1,2]`, `null`, `"x"`, `{"a":1} {"b":2}`, `{"mock":"yes"}`, `{"idempotence_ttl":{"s":1}}`,
	} {
		f.Add([]byte(seed))
	}
	names := map[string]bool{}
	for _, o := range configOptions {
		names[o.name] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := FromJSON(data)
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("FromJSON(%q) accepted a configuration that does not validate: %v", data, verr)
			}
			return
		}
		if strings.HasPrefix(err.Error(), "config: options ") {
			if json.Valid(data) && isObject(data) {
				t.Fatalf("FromJSON(%q): %v, for a JSON object", data, err)
			}
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			name, _, _ := strings.Cut(line, ":")
			name, _, _ = strings.Cut(name, "[")
			name, _, _ = strings.Cut(name, " ")
			// An unknown key is named as the user wrote it.
			if !names[name] && !strings.HasPrefix(line, "PROSODY_") && !strings.HasSuffix(line, ": unknown option") {
				t.Fatalf("FromJSON(%q): error line %q names no option", data, line)
			}
		}
		var oe *OptionError
		if !errors.As(err, &oe) {
			t.Fatalf("FromJSON(%q) = %v, not an *OptionError", data, err)
		}
	})
}

func isObject(data []byte) bool {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return false
	}
	_, ok := v.(map[string]any)
	return ok || v == nil
}
