package cassandra

import (
	"errors"
	"strings"
)

// tlsFailures map what a failed handshake says to the option to check.
// gocql flattens the cause into text ("unable to create session: %v"), so
// the x509 and tls error types are gone by the time the error arrives.
var tlsFailures = []struct{ text, option, reason string }{
	{"certificate signed by unknown authority", "cassandra_ssl_ca_location", "the node's certificate is not signed by a trusted CA"},
	{"x509: certificate is valid for", "cassandra_ssl_ca_location", "the node's certificate is for another name"},
	{"x509: certificate has expired", "cassandra_ssl_ca_location", "the node's certificate has expired"},
	{"remote error: tls:", "cassandra_ssl_certificate_location", "the node refused the TLS handshake (its client certificate requirement)"},
	{"tls: first record does not look like a TLS handshake", "cassandra_ssl_enabled", "the node does not speak TLS on this port"},
}

// explainTLS names the option behind a TLS failure, or returns nil for
// any other error. Such failures are terminal: retrying cannot fix them.
func explainTLS(err error) error {
	msg := err.Error()
	for _, f := range tlsFailures {
		if strings.Contains(msg, f.text) {
			return errors.New(f.option + ": " + f.reason + ": " + msg)
		}
	}
	return nil
}
