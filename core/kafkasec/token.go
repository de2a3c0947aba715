package kafkasec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// tokenFile is a sarama.AccessTokenProvider for OAUTHBEARER that reads the
// token from a file, which a sidecar or an operator refreshes. sarama asks
// for a token at every authentication (each new connection); the file is
// read again when it has changed or when the token it held has expired
// (the "exp" claim of a JWT; an opaque token has none), so a refreshed
// token is used without a restart and an unchanged one costs a stat.
type tokenFile struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	token   string
	modTime time.Time
	size    int64
	expires time.Time // zero when unknown
}

func newTokenFile(path string) *tokenFile { return &tokenFile{path: path, now: time.Now} }

const tokenOption = "sasl_oauthbearer_token_file"

func (t *tokenFile) Token() (*sarama.AccessToken, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err := os.Stat(t.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tokenOption, err)
	}
	stale := t.token == "" || !st.ModTime().Equal(t.modTime) || st.Size() != t.size ||
		(!t.expires.IsZero() && !t.now().Before(t.expires))
	if stale {
		if err := t.read(st); err != nil {
			return nil, err
		}
	}
	if !t.expires.IsZero() && !t.now().Before(t.expires) {
		return nil, fmt.Errorf("%s: the token in %q expired at %s and the file has not been refreshed",
			tokenOption, t.path, t.expires.UTC().Format(time.RFC3339))
	}
	return &sarama.AccessToken{Token: t.token}, nil
}

func (t *tokenFile) read(st os.FileInfo) error {
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("%s: reading the token: %w", tokenOption, err)
	}
	token := string(bytes.TrimSpace(data))
	if token == "" {
		return fmt.Errorf("%s: %q is empty", tokenOption, t.path)
	}
	t.token, t.modTime, t.size, t.expires = token, st.ModTime(), st.Size(), jwtExpiry(token)
	return nil
}

// jwtExpiry returns the "exp" claim of a JWT, or the zero time for a token
// that is not one.
func jwtExpiry(token string) time.Time {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(claims.Exp), 0)
}
