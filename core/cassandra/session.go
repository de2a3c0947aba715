package cassandra

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/fault"
)

// Session is a connected, migrated Cassandra session. It is safe for
// concurrent use and meant to be shared by every store of one client.
type Session struct {
	gs       *gocql.Session
	keyspace string
	clock    clock
	logger   *slog.Logger
}

// Connect opens a session, creates the keyspace when it is missing and
// applies pending migrations. It returns only once the schema is usable.
func Connect(ctx context.Context, o Options) (*Session, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	hosts, err := hostPorts(o.Nodes)
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	cluster := gocql.NewCluster(hosts...)
	cluster.Consistency = gocql.LocalQuorum
	cluster.SerialConsistency = gocql.LocalSerial
	cluster.PoolConfig.HostSelectionPolicy = hostPolicy(o.Datacenter, o.Rack)
	cluster.Compressor = lz4Compressor{}
	// Timestamps are set per statement from a monotonic clock (Query, Batch);
	// this flag also covers statements issued through Gocql() directly.
	cluster.DefaultTimestamp = true
	cluster.Timeout = 12 * time.Second
	cluster.ConnectTimeout = 12 * time.Second
	cluster.Logger = slogLogger{logger}
	// gocql handles a schema event on a goroutine it does not track, which
	// waits up to a minute for schema agreement even after Close: any client
	// migrating a keyspace would make every open session leave one behind.
	// Nothing here needs those events (migrations wait for agreement
	// themselves), so a closed session leaves no goroutine.
	cluster.Events.DisableSchemaEvents = true
	if o.User != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: o.User, Password: o.Password.Reveal()}
	}
	if o.TLS != nil {
		src, err := o.TLS.Source()
		if err != nil {
			return nil, fault.Terminal(fmt.Errorf("cassandra: %w", err))
		}
		cluster.HostDialer = &tlsDialer{
			dialer: &net.Dialer{Timeout: cluster.ConnectTimeout, KeepAlive: cluster.SocketKeepalive},
			tls:    src,
		}
	}
	// The keyspace may not exist yet, so the session is not bound to one:
	// statements name their tables fully qualified instead.
	gs, err := cluster.CreateSession()
	if err != nil {
		if explained := explainRefusal(err, o.TLS); explained != nil {
			return nil, fault.Terminal(fmt.Errorf("cassandra: connect to %v: %w", hosts, explained))
		}
		return nil, Classify(fmt.Errorf("cassandra: connect to %v: %w", hosts, err))
	}
	// Unquoted identifiers are case-insensitive and stored lower-case.
	s := &Session{gs: gs, keyspace: strings.ToLower(o.Keyspace), logger: logger}
	if err := s.migrate(ctx); err != nil {
		gs.Close()
		return nil, err
	}
	return s, nil
}

// hostPolicy routes each statement to a replica of its partition (token
// aware), choosing among replicas of the local datacenter and, when a rack is
// configured, of the local rack first.
func hostPolicy(dc, rack string) gocql.HostSelectionPolicy {
	var fallback gocql.HostSelectionPolicy
	switch {
	case dc != "" && rack != "":
		fallback = gocql.RackAwareRoundRobinPolicy(dc, rack)
	case dc != "":
		fallback = gocql.DCAwareRoundRobinPolicy(dc)
	default:
		fallback = gocql.RoundRobinHostPolicy()
	}
	return gocql.TokenAwareHostPolicy(fallback)
}

// Close releases every connection. Stores using the session must not be
// used afterwards.
func (s *Session) Close() { s.gs.Close() }

// Gocql exposes the underlying session for store packages.
func (s *Session) Gocql() *gocql.Session { return s.gs }

// Keyspace is the keyspace every table lives in; statements must qualify
// table names with it.
func (s *Session) Keyspace() string { return s.keyspace }

// Timestamp returns the next write timestamp (microseconds), strictly
// greater than every one this session handed out before.
func (s *Session) Timestamp() int64 { return s.clock.next() }

// Query builds a statement bound to ctx and stamped with a monotonic write
// timestamp. gocql prepares statements with values once per connection and
// reuses them, so callers should keep statement text constant.
func (s *Session) Query(ctx context.Context, stmt string, values ...any) *gocql.Query {
	return s.gs.Query(stmt, values...).WithContext(ctx).WithTimestamp(s.clock.next())
}

// Batch builds an unlogged batch bound to ctx with a monotonic write
// timestamp. Unlogged batches confined to one partition are still applied
// atomically and in isolation, which is what the stores rely on.
func (s *Session) Batch(ctx context.Context) *gocql.Batch {
	return s.gs.NewBatch(gocql.UnloggedBatch).WithContext(ctx).WithTimestamp(s.clock.next())
}

// ExecuteBatch runs a batch built by Batch.
func (s *Session) ExecuteBatch(b *gocql.Batch) error { return s.gs.ExecuteBatch(b) }

// slogLogger forwards gocql's diagnostics (reconnects, schema agreement) to
// slog at debug level: they are noisy and the outcome that matters reaches
// callers as errors anyway.
type slogLogger struct{ l *slog.Logger }

func (g slogLogger) Print(v ...any) { g.l.Debug(fmt.Sprint(v...), "component", "gocql") }
func (g slogLogger) Printf(format string, v ...any) {
	g.l.Debug(fmt.Sprintf(format, v...), "component", "gocql")
}
func (g slogLogger) Println(v ...any) { g.l.Debug(fmt.Sprint(v...), "component", "gocql") }
