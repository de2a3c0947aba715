package cassandra

import (
	"errors"
	"strings"

	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// loginFailures and tlsFailures map what a refused connection says to the
// option to check. gocql flattens the cause into text ("unable to create
// session: %v"), so the x509, tls and protocol error types are gone by the
// time the error arrives.
var loginFailures = []struct{ text, option, reason string }{
	{"and/or password are incorrect", "cassandra_user / cassandra_password", "the node refused the credentials"},
	{"authentication required", "cassandra_user / cassandra_password", "the node requires a login, and cassandra_user is not set"},
}

var tlsFailures = []struct{ text, option, reason string }{
	{"certificate signed by unknown authority", "cassandra_ssl_ca_location", "the node's certificate is not signed by a trusted CA"},
	{"x509: certificate is valid for", "cassandra_ssl_server_name", "the node's certificate is for another name"},
	{"x509: certificate has expired", "cassandra_ssl_ca_location", "the node's certificate has expired"},
	{"tls: first record does not look like a TLS handshake", "cassandra_ssl_enabled", "the node does not speak TLS on this port"},
}

// explainRefusal names the option behind a refused login or, with TLS on
// (files not nil), a failed handshake, or returns nil for any other error.
// Such failures are terminal: retrying cannot fix them.
func explainRefusal(err error, files *tlsconf.Files) error {
	msg := err.Error()
	failures := loginFailures
	if files != nil {
		if alert, ok := tlsconf.AlertFromText(msg); ok {
			option, reason := files.ExplainAlert(alert, "node", "cassandra_ssl_enabled")
			return errors.New(option + ": " + reason + ": " + msg)
		}
		failures = append(failures[:len(failures):len(failures)], tlsFailures...)
	}
	for _, f := range failures {
		if strings.Contains(msg, f.text) {
			return errors.New(f.option + ": " + f.reason + ": " + msg)
		}
	}
	return nil
}
