package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
)

// TLS alert codes (RFC 8446 §6, RFC 5246 §7.2) that the explanations
// below tell apart. crypto/tls does not export its own constants.
const (
	alertHandshakeFailure       tls.AlertError = 40
	alertBadCertificate         tls.AlertError = 42
	alertUnsupportedCertificate tls.AlertError = 43
	alertCertificateRevoked     tls.AlertError = 44
	alertCertificateExpired     tls.AlertError = 45
	alertCertificateUnknown     tls.AlertError = 46
	alertUnknownCA              tls.AlertError = 48
	alertProtocolVersion        tls.AlertError = 70
	alertInsufficientSecurity   tls.AlertError = 71
	alertUnrecognizedName       tls.AlertError = 112
	alertCertificateRequired    tls.AlertError = 116
)

// RemoteAlert returns the alert the server ended the handshake with, if
// err is one ("remote error: tls: bad certificate"). crypto/tls reports it
// as a net.OpError with this Op around an unexported type, so the alert is
// recognised by its text, which is also all that is left of it once a
// library has flattened the error into a string (gocql does).
func RemoteAlert(err error) (tls.AlertError, bool) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		return AlertFromText("remote error: " + op.Err.Error())
	}
	return AlertFromText(err.Error())
}

// AlertFromText finds "remote error: tls: <alert>" in msg and returns that
// alert. The longest matching description wins, since some are prefixes of
// others ("unknown certificate" and "unknown certificate authority").
func AlertFromText(msg string) (tls.AlertError, bool) {
	const marker = "remote error: "
	i := strings.Index(msg, marker)
	if i < 0 {
		return 0, false
	}
	rest := msg[i+len(marker):]
	var (
		found tls.AlertError
		best  int
	)
	for code := range 256 {
		text := tls.AlertError(code).Error()
		if len(text) > best && strings.HasPrefix(rest, text) {
			found, best = tls.AlertError(code), len(text)
		}
	}
	return found, best > 0
}

// refusesClientCertificate reports whether a server sends alert when it
// refuses the client's certificate or finds none: the ones RFC 8446 ties
// to the peer's certificate, and certificate_unknown, which Java servers
// (Kafka, Cassandra) send for a certificate they cannot verify.
func refusesClientCertificate(alert tls.AlertError) bool {
	switch alert {
	case alertBadCertificate, alertUnsupportedCertificate, alertCertificateRevoked, alertCertificateExpired,
		alertCertificateUnknown, alertUnknownCA, alertCertificateRequired:
		return true
	}
	return false
}

// ExplainAlert names the option to look at when the server (the "broker"
// or the "node": peer) ended the handshake with alert, and says why.
// protocolOption is the option that asks for TLS (security_protocol,
// cassandra_ssl_enabled), blamed for alerts about the handshake itself.
func (f Files) ExplainAlert(alert tls.AlertError, peer, protocolOption string) (option, reason string) {
	name := strings.TrimPrefix(alert.Error(), "tls: ")
	switch {
	case refusesClientCertificate(alert) && f.Cert == "":
		return f.option("ssl_certificate_location"), fmt.Sprintf("the TLS handshake failed: the %s requires a client certificate, and none is set (TLS alert %q)", peer, name)
	case refusesClientCertificate(alert):
		return f.option("ssl_certificate_location"), fmt.Sprintf("the TLS handshake failed: the %s refused the client certificate in %q (TLS alert %q)", peer, f.Cert, name)
	case alert == alertUnrecognizedName:
		return f.option("ssl_server_name"), fmt.Sprintf("the TLS handshake failed: the %s has no certificate for the name the client asked for (TLS alert %q)", peer, name)
	case alert == alertHandshakeFailure || alert == alertProtocolVersion || alert == alertInsufficientSecurity:
		// Some servers (OpenSSL's TLS 1.2) also send handshake_failure for
		// a missing client certificate.
		why := "share no TLS version or cipher suite"
		if f.Cert == "" && alert == alertHandshakeFailure {
			why += ", or the " + peer + " requires a client certificate and none is set (" + f.option("ssl_certificate_location") + ")"
		}
		return protocolOption, fmt.Sprintf("the TLS handshake failed: the %s and the client %s (TLS alert %q)", peer, why, name)
	default:
		return protocolOption, fmt.Sprintf("the TLS handshake failed: the %s ended it with TLS alert %q", peer, name)
	}
}
