package cassandra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// tlsDialer is gocql's own host dialer (TCP, then gocql.WrapTLS), but
// with a configuration taken from the Source for each connection, so that
// a renewed client certificate or CA bundle is used without a new session.
// gocql's SslOpts would fix the configuration when the session starts.
type tlsDialer struct {
	dialer *net.Dialer
	tls    *tlsconf.Source
}

func (d *tlsDialer) DialHost(ctx context.Context, host *gocql.HostInfo) (*gocql.DialedHost, error) {
	if ip := host.ConnectAddress(); ip == nil || ip.IsUnspecified() {
		return nil, fmt.Errorf("host missing connect ip address: %v", ip)
	}
	if host.Port() == 0 {
		return nil, errors.New("host missing port: 0")
	}
	conn, err := d.dialer.DialContext(ctx, "tcp", host.ConnectAddressAndPort())
	if err != nil {
		return nil, err
	}
	// WrapTLS names the server after the host unless the configuration
	// names it (cassandra_ssl_server_name) or does not verify, as gocql's
	// SslOpts did.
	return gocql.WrapTLS(ctx, conn, host.HostnameAndPort(), d.tls.Config())
}

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
