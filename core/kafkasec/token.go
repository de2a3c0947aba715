package kafkasec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// tokenFile is a sarama.AccessTokenProvider for OAUTHBEARER that reads the
// token from a file, which a sidecar or an operator refreshes. sarama asks
// for a token at every authentication: each new connection, and each
// re-authentication the broker's session lifetime calls for. The file is
// read every time, so a renewed token is used as soon as it is on disk.
// A cache would have to notice the renewal: a modification time and size
// can stay the same across a rewrite (a JWT of the same length written
// within the file system's time granularity, or a copy that keeps the
// time), and a cache refreshed only at expiry would keep handing out a
// token about to expire, whose session the broker ends moments later.
// Reading a few hundred bytes per authentication costs nothing beside the
// TLS handshake and the SASL exchange around it.
type tokenFile struct {
	path string
	now  func() time.Time
}

func newTokenFile(path string) *tokenFile { return &tokenFile{path: path, now: time.Now} }

const tokenOption = "sasl_oauthbearer_token_file"

func (t *tokenFile) Token() (*sarama.AccessToken, error) {
	data, err := os.ReadFile(t.path)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the token: %w", tokenOption, err)
	}
	token := string(bytes.TrimSpace(data))
	if token == "" {
		return nil, fmt.Errorf("%s: %q is empty", tokenOption, t.path)
	}
	// An expired token would be refused: say so rather than let the broker
	// answer with a bare authentication failure.
	if expires := jwtExpiry(token); !expires.IsZero() && !t.now().Before(expires) {
		return nil, fmt.Errorf("%s: the token in %q expired at %s and the file has not been refreshed",
			tokenOption, t.path, expires.UTC().Format(time.RFC3339))
	}
	return &sarama.AccessToken{Token: token}, nil
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
