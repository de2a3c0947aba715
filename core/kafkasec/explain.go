package kafkasec

import (
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// AuthError is a connection failure that retrying with the same settings
// cannot fix: refused credentials or a failed TLS handshake. Option names
// the setting to look at.
type AuthError struct {
	Option string
	Reason string
	Err    error
}

func (e *AuthError) Error() string { return e.Option + ": " + e.Reason + ": " + e.Err.Error() }
func (e *AuthError) Unwrap() error { return e.Err }

// Explain returns err as an *AuthError when it is an authentication or TLS
// failure, else err unchanged. Callers stop retrying on an *AuthError.
func (s Settings) Explain(err error) error {
	if err == nil {
		return nil
	}
	var already *AuthError
	if errors.As(err, &already) {
		return err
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		expired   *tlsconf.ExpiredError
		mismatch  *mismatchError
	)
	switch {
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed) && s.Mechanism == config.MechanismOAuthBearer:
		return &AuthError{Option: "sasl_oauthbearer_token_file", Reason: fmt.Sprintf("the broker refused the token in %q", s.TokenFile), Err: err}
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed):
		return &AuthError{Option: "sasl_username / sasl_password",
			Reason: fmt.Sprintf("the broker refused the %s credentials of user %q", s.Mechanism, s.Username), Err: err}
	case errors.Is(err, sarama.ErrUnsupportedSASLMechanism):
		return &AuthError{Option: "sasl_mechanism", Reason: fmt.Sprintf("the broker does not offer %s", s.Mechanism), Err: err}
	case errors.As(err, &mismatch):
		return &AuthError{Option: "security_protocol", Reason: s.explainMismatch(mismatch), Err: err}
	case errors.As(err, &expired):
		return &AuthError{Option: expired.Option, Reason: "the client certificate has expired", Err: err}
	case errors.As(err, &unknownCA):
		return &AuthError{Option: "ssl_ca_location", Reason: "the broker's certificate is not signed by a trusted CA", Err: err}
	case errors.As(err, &hostname):
		return &AuthError{Option: "ssl_server_name", Reason: "the broker's certificate is for another name", Err: err}
	case errors.As(err, &invalid):
		return &AuthError{Option: "ssl_ca_location", Reason: "the broker's certificate is not valid (expired, or not yet valid)", Err: err}
	case tlsconf.IsRemoteAlert(err):
		if alert, ok := tlsconf.RemoteAlert(err); ok {
			option, reason := s.TLS.ExplainAlert(alert, "broker", "security_protocol")
			return &AuthError{Option: option, Reason: reason, Err: err}
		}
		return &AuthError{Option: "security_protocol", Reason: "the TLS handshake failed: the broker ended it with a TLS alert", Err: err}
	case tlsconf.IsHandshakeFailure(err):
		return &AuthError{Option: "security_protocol", Reason: "the TLS handshake failed", Err: err}
	}
	return err
}

// explainMismatch says what the listener speaks instead.
func (s Settings) explainMismatch(m *mismatchError) string {
	protocol := s.Protocol
	if protocol == "" {
		protocol = config.ProtocolPlaintext
	}
	if m.clientTLS {
		return fmt.Sprintf("the broker at %s did not answer a TLS handshake; is security_protocol right? %q speaks TLS and this listener seems not to (a plaintext or sasl_plaintext listener?)", m.addr, protocol)
	}
	return fmt.Sprintf("the broker at %s answered with TLS; is security_protocol right? %q does not speak TLS and this listener does (an ssl or sasl_ssl listener?)", m.addr, protocol)
}

// IsAuthError reports whether err is (or wraps) an *AuthError.
func IsAuthError(err error) bool {
	var ae *AuthError
	return errors.As(err, &ae)
}
