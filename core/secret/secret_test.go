package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// holder has the shapes a Secret ends up in: an exported field, an
// unexported one, a pointer and a map value.
type holder struct {
	Password Secret
	hidden   Secret
	Ptr      *Secret
	Map      map[string]Secret
}

func TestSecretNeverPrintsItsValue(t *testing.T) {
	const pw = "s3cr3t-Pa55"
	s := New(pw)
	h := holder{Password: s, hidden: s, Ptr: &s, Map: map[string]Secret{"k": s}}

	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("t", "s", s, "h", h)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("t", "s", s, "h", h)
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}

	outputs := map[string]string{"json": string(js), "slog": logs.String()}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s"} {
		outputs[verb+" secret"] = fmt.Sprintf(verb, s)
		outputs[verb+" holder"] = fmt.Sprintf(verb, h)
		outputs[verb+" pointer"] = fmt.Sprintf(verb, &h)
	}
	for name, out := range outputs {
		if strings.Contains(out, pw) || strings.Contains(out, fmt.Sprintf("%x", pw)) {
			t.Errorf("%s leaks the secret: %s", name, out)
		}
	}
	if !strings.Contains(outputs["%v secret"], Redacted) {
		t.Errorf("%%v = %q, want %q", outputs["%v secret"], Redacted)
	}
	if got := s.Reveal(); got != pw {
		t.Errorf("Reveal() = %q", got)
	}
}

func TestEmptySecret(t *testing.T) {
	for _, s := range []Secret{{}, New("")} {
		if s.IsSet() || s.Reveal() != "" || s.String() != "" {
			t.Errorf("empty secret: IsSet %v, Reveal %q, String %q", s.IsSet(), s.Reveal(), s.String())
		}
	}
	if !New("a").Equal(New("a")) || New("a").Equal(New("b")) {
		t.Error("Equal compares values")
	}
}
