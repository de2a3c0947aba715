package config

import (
	"strconv"
	"strings"
	"unicode"
)

// OptionError reports one option whose value is unusable. Loading and
// validation return every such problem at once, combined with errors.Join;
// use errors.As to get at the individual entries.
type OptionError struct {
	// Option is the snake_case option name, for example "max_concurrency".
	// For keyed-state collections it includes the index and field, as in
	// "state_collections[2].ttl_seconds".
	Option string
	// EnvVar names the environment variable the bad value came from. It is
	// empty when the value was given explicitly or is a default.
	EnvVar string
	// Message says what is allowed and, usually, what was given.
	Message string
	// Err is the underlying parse error, if any.
	Err error
}

func (e *OptionError) Error() string {
	var b strings.Builder
	b.WriteString(e.Option)
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.EnvVar != "" {
		b.WriteString(" (from ")
		b.WriteString(e.EnvVar)
		b.WriteString(")")
	}
	return b.String()
}

func (e *OptionError) Unwrap() error { return e.Err }

// userKey is an unknown key as the user wrote it, for an error's Option:
// quoted when it is empty or holds spaces, colons, quotes or control
// characters, so that the error stays on one line and the key reads as
// one.
func userKey(name string) string {
	plain := name != ""
	for _, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == ':' || r == '"' {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return strconv.Quote(name)
}
