// Package secret holds passwords, tokens and private-key passphrases so that
// they cannot leave the process by accident: a Secret prints, marshals and
// logs as "[redacted]" whatever verb, encoder or slog handler formats it,
// and only Reveal gives the text back, to the code that hands it to a
// network library.
package secret

import (
	"fmt"
	"log/slog"
)

// Redacted is what a Secret prints instead of its value.
const Redacted = "[redacted]"

// Secret is an immutable secret string. The zero value is the empty
// secret. It is compared with Equal (reflect.DeepEqual sees two set
// secrets as different) and copied freely.
type Secret struct {
	// The value is held by a closure: a printer that walks unexported
	// fields by reflection, where no method of Secret is called (fmt does
	// that for an unexported field holding a Secret, and for a wrong verb),
	// finds only a function and prints its address. A pointer to a string
	// or to a byte slice would be followed and printed.
	reveal func() string
}

// New wraps s. An empty s gives the empty secret.
func New(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{reveal: func() string { return s }}
}

// Reveal returns the secret text. Call it only to hand the value to the
// library that authenticates with it.
func (s Secret) Reveal() string {
	if s.reveal == nil {
		return ""
	}
	return s.reveal()
}

// IsSet reports whether the secret is not empty.
func (s Secret) IsSet() bool { return s.reveal != nil }

// Equal compares two secrets by value.
func (s Secret) Equal(o Secret) bool { return s.Reveal() == o.Reveal() }

// String returns "[redacted]", or "" for the empty secret so that a
// printed configuration still shows whether one was given.
func (s Secret) String() string {
	if !s.IsSet() {
		return ""
	}
	return Redacted
}

// GoString makes %#v redacted too.
func (s Secret) GoString() string { return fmt.Sprintf("secret.Secret(%q)", s.String()) }

// Format covers every fmt verb, including %x and %q, which would otherwise
// bypass String for some types.
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = fmt.Fprint(f, s.GoString())
	case verb == 'q':
		_, _ = fmt.Fprintf(f, "%q", s.String())
	default:
		_, _ = fmt.Fprint(f, s.String())
	}
}

// MarshalJSON writes the redacted form: a configuration serialised for a
// log or a diagnostic never carries the value.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText is MarshalJSON for text encoders.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue makes slog print the redacted form with any handler.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
