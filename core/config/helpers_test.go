package config

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/goccy/go-json"
)

// clearEnv removes every PROSODY_* variable for the duration of the test, so
// that the machine's environment cannot leak into results. t.Setenv restores
// the old values afterwards.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PROSODY_") {
			t.Setenv(name, "")
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// setEnv sets several variables for the test.
func setEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

// options builds a JSON options document. Values are raw JSON literals.
func options(t *testing.T, raw map[string]string) []byte {
	t.Helper()
	obj := make(map[string]json.RawMessage, len(raw))
	for k, v := range raw {
		obj[k] = json.RawMessage(v)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("building options %v: %v", raw, err)
	}
	return data
}

// withBase adds the settings every valid configuration needs, unless the
// test sets them itself.
func withBase(raw map[string]string) map[string]string {
	out := map[string]string{"bootstrap_servers": `"kafka:9092"`}
	for k, v := range raw {
		out[k] = v
	}
	return out
}

// optionErrors flattens a joined error into its *OptionError parts.
func optionErrors(t *testing.T, err error) []*OptionError {
	t.Helper()
	var out []*OptionError
	var walk func(error)
	walk = func(err error) {
		if oe, ok := err.(*OptionError); ok {
			out = append(out, oe)
			return
		}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		t.Errorf("error %v (%T) is not an *OptionError", err, err)
	}
	walk(err)
	return out
}

// requireOptionError fails unless err contains an *OptionError for option
// (or one of its sub-fields) whose text contains every fragment.
func requireOptionError(t *testing.T, err error, option string, fragments ...string) *OptionError {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error for %s, got none", option)
	}
	var oe *OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("error %q is not an *OptionError", err)
	}
	for _, e := range optionErrors(t, err) {
		if e.Option != option && !strings.HasPrefix(e.Option, option+"[") {
			continue
		}
		text := e.Error()
		missing := false
		for _, f := range fragments {
			if !strings.Contains(text, f) {
				missing = true
			}
		}
		if !missing {
			if !strings.HasPrefix(text, e.Option+": ") {
				t.Errorf("error %q does not start with the option name", text)
			}
			return e
		}
	}
	t.Fatalf("no error for %s containing %q in:\n%v", option, fragments, err)
	return nil
}
