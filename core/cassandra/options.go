package cassandra

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/secret"
	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// DefaultPort is the CQL native port used for nodes given without one.
const DefaultPort = 9042

// Options are the connection settings; they mirror the cassandra_* options of
// the client configuration.
type Options struct {
	Nodes      []string // "host" or "host:port"; the port defaults to 9042
	Keyspace   string   // created with SimpleStrategy RF 1 when missing
	User       string   // password authentication is used when set
	Password   secret.Secret
	Datacenter string // preferred (local) datacenter; empty means any
	Rack       string // preferred rack inside Datacenter; needs Datacenter
	// TLS encrypts the connections when not nil (client encryption);
	// its Prefix is "cassandra_" so that errors name the client options.
	TLS    *tlsconf.Files
	Logger *slog.Logger
}

// Keyspace names are interpolated into CQL text, so only unquoted identifiers
// are accepted; this is also what Cassandra itself allows without quoting.
var keyspacePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

func (o Options) validate() error {
	if len(o.Nodes) == 0 {
		return fault.Terminal(errors.New("cassandra: no nodes configured"))
	}
	if !keyspacePattern.MatchString(o.Keyspace) {
		return fault.Terminal(fmt.Errorf("cassandra: invalid keyspace name %q: want a letter followed by up to 47 letters, digits or underscores", o.Keyspace))
	}
	if o.Rack != "" && o.Datacenter == "" {
		return fault.Terminal(errors.New("cassandra: a rack needs a datacenter"))
	}
	return nil
}

// hostPorts normalizes the configured nodes to host:port. gocql accepts both
// forms, but a bare IPv6 address would be misread, so the default port is
// added here explicitly.
func hostPorts(nodes []string) ([]string, error) {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		host, port, err := net.SplitHostPort(n)
		if err != nil {
			// No port (or a bare IPv6 address): use the default one.
			host, port = strings.Trim(n, "[]"), strconv.Itoa(DefaultPort)
		} else if p, perr := strconv.Atoi(port); perr != nil || p <= 0 || p > 65535 {
			return nil, fault.Terminal(fmt.Errorf("cassandra: node %q: invalid port", n))
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	if len(out) == 0 {
		return nil, fault.Terminal(errors.New("cassandra: no nodes configured"))
	}
	return out, nil
}
