package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPrecedence(t *testing.T) {
	clearEnv(t)
	setEnv(t, map[string]string{
		"PROSODY_BOOTSTRAP_SERVERS": "env:9092",
		"PROSODY_MAX_CONCURRENCY":   "8",
		"PROSODY_MAX_RETRIES":       "7",
	})
	cfg, err := Load(func(c *Config) { c.MaxConcurrency = 2 })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConcurrency != 2 {
		t.Errorf("explicit: got %d, want 2", cfg.MaxConcurrency)
	}
	if cfg.MaxRetries != 7 {
		t.Errorf("environment: got %d, want 7", cfg.MaxRetries)
	}
	if cfg.MaxUncommitted != 64 {
		t.Errorf("default: got %d, want 64", cfg.MaxUncommitted)
	}
	if !reflect.DeepEqual(cfg.BootstrapServers, []string{"env:9092"}) {
		t.Errorf("bootstrap servers: got %v", cfg.BootstrapServers)
	}
}

func TestDefaultsAreValid(t *testing.T) {
	clearEnv(t)
	cfg, err := FromJSON([]byte(`{"bootstrap_servers": "kafka:9092"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.BootstrapServers = []string{"kafka:9092"}
	want.envVars = cfg.envVars
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("loaded %+v\nwant %+v", *cfg, want)
	}
}

func TestNoOptionsReadsEnvironmentOnly(t *testing.T) {
	clearEnv(t)
	t.Setenv("PROSODY_BOOTSTRAP_SERVERS", "a:1")
	for _, in := range []string{"", "  ", "null", "{}"} {
		cfg, err := FromJSON([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if !reflect.DeepEqual(cfg.BootstrapServers, []string{"a:1"}) {
			t.Errorf("%q: bootstrap servers %v", in, cfg.BootstrapServers)
		}
	}
}

func TestBadJSONDocument(t *testing.T) {
	clearEnv(t)
	for _, in := range []string{`[1]`, `"x"`, `{"mock": }`, `{} {}`, `{"a":1`} {
		if _, err := FromJSON([]byte(in)); err == nil {
			t.Errorf("%s: expected an error", in)
		}
	}
}

func TestUnknownJSONKey(t *testing.T) {
	clearEnv(t)
	_, err := FromJSON([]byte(`{"bootstrap_servers": "k:1", "max_concurency": 3, "log": "debug"}`))
	requireOptionError(t, err, "max_concurency", "max_concurency: unknown option")
	// PROSODY_LOG has no JSON key.
	requireOptionError(t, err, "log", "log: unknown option")
}

func TestJSONNullFallsBack(t *testing.T) {
	clearEnv(t)
	setEnv(t, map[string]string{"PROSODY_MAX_CONCURRENCY": "8", "PROSODY_GROUP_ID": "env-group"})
	cfg, err := FromJSON([]byte(`{"bootstrap_servers": "k:1", "max_concurrency": null, "group_id": null,
		"max_retries": null, "timeout": null, "send_timeout": null, "state_collections": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConcurrency != 8 || cfg.GroupID != "env-group" {
		t.Errorf("null should keep the environment: got %d, %q", cfg.MaxConcurrency, cfg.GroupID)
	}
	if cfg.MaxRetries != 3 {
		t.Errorf("null should keep the default: got %d", cfg.MaxRetries)
	}
	if cfg.Timeout.IsSet() || cfg.SendTimeout != Some(time.Second) {
		t.Errorf("null optional durations: timeout %v, send_timeout %v", cfg.Timeout, cfg.SendTimeout)
	}
}

func TestProbePort(t *testing.T) {
	tests := []struct {
		name string
		env  string // "" leaves PROSODY_PROBE_PORT unset
		json string // "" leaves probe_port out
		want Optional[int]
	}{
		{name: "default", want: Some(8000)},
		{name: "env port", env: "9100", want: Some(9100)},
		{name: "env none", env: "none", want: None[int]()},
		{name: "env NONE", env: "NONE", want: None[int]()},
		{name: "json port beats env none", env: "none", json: `9200`, want: Some(9200)},
		{name: "json null disables", env: "9100", json: `null`, want: None[int]()},
		{name: "json none disables", json: `"None"`, want: None[int]()},
		{name: "zero means any free port", json: `0`, want: Some(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			if tc.env != "" {
				t.Setenv("PROSODY_PROBE_PORT", tc.env)
			}
			raw := withBase(nil)
			if tc.json != "" {
				raw["probe_port"] = tc.json
			}
			cfg, err := FromJSON(options(t, raw))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ProbePort != tc.want {
				t.Errorf("got %v, want %v", cfg.ProbePort, tc.want)
			}
		})
	}
	t.Run("string port is not a number", func(t *testing.T) {
		clearEnv(t)
		_, err := FromJSON(options(t, withBase(map[string]string{"probe_port": `"8000"`})))
		requireOptionError(t, err, "probe_port", `must be a whole number, got "8000"`)
	})
}

func TestHandlerTimeout(t *testing.T) {
	clearEnv(t)
	cfg, err := FromJSON([]byte(`{"bootstrap_servers": "k:1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.HandlerTimeout(); got != 4*time.Minute {
		t.Errorf("default handler timeout %v, want 4m", got)
	}

	t.Setenv("PROSODY_STALL_THRESHOLD", "60s")
	if cfg, err = FromJSON([]byte(`{"bootstrap_servers": "k:1"}`)); err != nil {
		t.Fatal(err)
	}
	if got := cfg.HandlerTimeout(); got != 48*time.Second {
		t.Errorf("handler timeout %v, want 48s (4/5 of 60s)", got)
	}

	t.Setenv("PROSODY_TIMEOUT", "30s")
	if cfg, err = FromJSON([]byte(`{"bootstrap_servers": "k:1"}`)); err != nil {
		t.Fatal(err)
	}
	if got := cfg.HandlerTimeout(); got != 30*time.Second {
		t.Errorf("handler timeout %v, want 30s", got)
	}

	// "none" in JSON clears the environment value again.
	if cfg, err = FromJSON([]byte(`{"bootstrap_servers": "k:1", "timeout": "none"}`)); err != nil {
		t.Fatal(err)
	}
	if got := cfg.HandlerTimeout(); got != 48*time.Second {
		t.Errorf("handler timeout %v, want 48s", got)
	}
}

func TestSendTimeoutNone(t *testing.T) {
	clearEnv(t)
	t.Setenv("PROSODY_SEND_TIMEOUT", "None")
	cfg, err := FromJSON([]byte(`{"bootstrap_servers": "k:1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SendTimeout.IsSet() {
		t.Errorf("send_timeout %v, want no bound", cfg.SendTimeout)
	}
	if cfg, err = FromJSON([]byte(`{"bootstrap_servers": "k:1", "send_timeout": 2.5}`)); err != nil {
		t.Fatal(err)
	}
	if cfg.SendTimeout != Some(2500*time.Millisecond) {
		t.Errorf("send_timeout %v, want 2.5s", cfg.SendTimeout)
	}
}

func TestSourceSystemDefaultsToGroup(t *testing.T) {
	clearEnv(t)
	cfg, err := FromJSON([]byte(`{"bootstrap_servers": "k:1", "group_id": "orders"}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SourceSystem != "" || cfg.SourceSystemOrGroup() != "orders" {
		t.Errorf("source system %q / %q, want unset / orders", cfg.SourceSystem, cfg.SourceSystemOrGroup())
	}
	cfg.SourceSystem = "billing"
	if got := cfg.SourceSystemOrGroup(); got != "billing" {
		t.Errorf("got %q, want billing", got)
	}
}

func TestLists(t *testing.T) {
	tests := []struct {
		name string
		env  string
		json string
		want []string
	}{
		{name: "env items trimmed, empties dropped", env: "a, b,,c", want: []string{"a", "b", "c"}},
		{name: "env single", env: "only", want: []string{"only"}},
		{name: "json string", json: `"a, b,,c"`, want: []string{"a", "b", "c"}},
		{name: "json array", json: `[" a", "b ", ""]`, want: []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			if tc.env != "" {
				t.Setenv("PROSODY_SUBSCRIBED_TOPICS", tc.env)
			}
			raw := withBase(nil)
			if tc.json != "" {
				raw["subscribed_topics"] = tc.json
			}
			cfg, err := FromJSON(options(t, raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.SubscribedTopics, tc.want) {
				t.Errorf("got %q, want %q", cfg.SubscribedTopics, tc.want)
			}
		})
	}
	t.Run("json array of non-strings", func(t *testing.T) {
		clearEnv(t)
		_, err := FromJSON(options(t, withBase(map[string]string{"subscribed_topics": `["a", 1]`})))
		requireOptionError(t, err, "subscribed_topics", "must be a list of strings, got an item 1")
	})
}

func TestAllowedEventsEmptyEnvAllowsAll(t *testing.T) {
	clearEnv(t)
	t.Setenv("PROSODY_ALLOWED_EVENTS", "")
	cfg, err := FromJSON([]byte(`{"bootstrap_servers": "k:1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AllowedEvents != nil {
		t.Errorf("got %q, want nil (no filter)", cfg.AllowedEvents)
	}
}

func TestBooleansIgnoreCase(t *testing.T) {
	for _, v := range []string{"true", "TRUE", "True", " true "} {
		t.Run(v, func(t *testing.T) {
			clearEnv(t)
			setEnv(t, map[string]string{"PROSODY_BOOTSTRAP_SERVERS": "k:1", "PROSODY_MOCK": v})
			cfg, err := Load()
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.Mock {
				t.Error("mock not enabled")
			}
		})
	}
}

func TestWholeNumbers(t *testing.T) {
	clearEnv(t)
	for _, v := range []string{`3.0`, `3`, `3e0`} {
		cfg, err := FromJSON(options(t, withBase(map[string]string{"max_concurrency": v})))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if cfg.MaxConcurrency != 3 {
			t.Errorf("%s: got %d", v, cfg.MaxConcurrency)
		}
	}
	for _, v := range []string{`2.5`, `"3"`, `true`, `1e30`} {
		_, err := FromJSON(options(t, withBase(map[string]string{"max_concurrency": v})))
		requireOptionError(t, err, "max_concurrency", "max_concurrency: must be a whole number, got "+v)
	}
}

func TestJSONDurations(t *testing.T) {
	tests := map[string]time.Duration{
		`1.5`:      1500 * time.Millisecond,
		`0.001`:    time.Millisecond,
		`"2h 30m"`: 150 * time.Minute,
		`"1500ms"`: 1500 * time.Millisecond,
		`120`:      2 * time.Minute,
	}
	for in, want := range tests {
		clearEnv(t)
		cfg, err := FromJSON(options(t, withBase(map[string]string{"stall_threshold": in})))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if cfg.StallThreshold != want {
			t.Errorf("%s: got %v, want %v", in, cfg.StallThreshold, want)
		}
	}
	for _, in := range []string{`"90"`, `true`, `1e300`, `[]`} {
		_, err := FromJSON(options(t, withBase(map[string]string{"stall_threshold": in})))
		requireOptionError(t, err, "stall_threshold", "must be a")
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	clearEnv(t)
	setEnv(t, map[string]string{
		"PROSODY_MAX_CONCURRENCY": "lots",
		"PROSODY_POLL_INTERVAL":   "5",
	})
	_, err := FromJSON([]byte(`{"bootstrap_servers": [], "defer_failure_threshold": 1.5, "mode": "x", "bogus": 1}`))
	errs := optionErrors(t, err)
	got := make(map[string]bool)
	for _, e := range errs {
		got[e.Option] = true
	}
	for _, want := range []string{"max_concurrency", "poll_interval", "bootstrap_servers",
		"defer_failure_threshold", "mode", "bogus"} {
		if !got[want] {
			t.Errorf("no error for %s in:\n%v", want, err)
		}
	}
	if len(errs) != 6 {
		t.Errorf("got %d errors, want 6:\n%v", len(errs), err)
	}
	e := requireOptionError(t, err, "max_concurrency", `got "lots"`)
	if e.EnvVar != "PROSODY_MAX_CONCURRENCY" {
		t.Errorf("EnvVar = %q", e.EnvVar)
	}
	pe := requireOptionError(t, err, "poll_interval", "(from PROSODY_POLL_INTERVAL)")
	var de *DurationError
	if !errors.As(pe, &de) {
		t.Errorf("poll_interval error does not wrap the *DurationError: %v", pe)
	}
}

func TestExplicitValueHidesBadEnvironment(t *testing.T) {
	clearEnv(t)
	setEnv(t, map[string]string{"PROSODY_MAX_CONCURRENCY": "lots", "PROSODY_POLL_INTERVAL": "5"})
	_, err := FromJSON([]byte(`{"bootstrap_servers": "k:1", "max_concurrency": 4}`))
	requireOptionError(t, err, "poll_interval", "(from PROSODY_POLL_INTERVAL)")
	if strings.Contains(err.Error(), "max_concurrency") {
		t.Errorf("overridden variable still reported: %v", err)
	}
	cfg, err := Load(func(c *Config) {
		c.BootstrapServers = []string{"k:1"}
		c.MaxConcurrency = 4
		c.PollInterval = time.Second
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConcurrency != 4 || cfg.PollInterval != time.Second {
		t.Errorf("got %d, %v", cfg.MaxConcurrency, cfg.PollInterval)
	}
}

func TestEnvironmentValueInValidationError(t *testing.T) {
	clearEnv(t)
	t.Setenv("PROSODY_MAX_CONCURRENCY", "0")
	_, err := FromJSON([]byte(`{"bootstrap_servers": "k:1"}`))
	requireOptionError(t, err, "max_concurrency",
		"max_concurrency: must be at least 1, got 0 (from PROSODY_MAX_CONCURRENCY)")

	// Once a Go caller changes the value, the variable is no longer blamed.
	_, err = Load(func(c *Config) { c.BootstrapServers = []string{"k:1"}; c.MaxConcurrency = -1 })
	e := requireOptionError(t, err, "max_concurrency", "got -1")
	if e.EnvVar != "" {
		t.Errorf("blamed on %s", e.EnvVar)
	}
}

func TestEnvironmentDoesNotFallBackToBareNames(t *testing.T) {
	// envconfig looks up the bare tag when a prefix is used; make sure a
	// variable called MOCK is not mistaken for PROSODY_MOCK.
	clearEnv(t)
	t.Setenv("MOCK", "true")
	t.Setenv("MAX_CONCURRENCY", "1")
	cfg, err := FromJSON([]byte(`{"bootstrap_servers": "k:1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mock || cfg.MaxConcurrency != 32 {
		t.Errorf("bare variables were read: mock=%v max_concurrency=%d", cfg.Mock, cfg.MaxConcurrency)
	}
}

// TestBadValueDoesNotBlameOthers: a value that fails to parse reports its
// own error only, not those of rules that would read its default instead.
func TestBadValueDoesNotBlameOthers(t *testing.T) {
	for _, tt := range []struct{ doc, want, not string }{
		{`{"mock":"yes","group_id":"g","subscribed_topics":"t"}`, "mock:", "cassandra_nodes"},
		{`{"retry_base":"soon","max_retry_delay":"1ms"}`, "retry_base:", "max_retry_delay"},
	} {
		_, err := FromJSON([]byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), tt.not) {
			t.Errorf("FromJSON(%s) = %v, want only the %s error", tt.doc, err, tt.want)
		}
	}
}
