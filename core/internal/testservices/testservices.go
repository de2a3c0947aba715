// Package testservices gives integration tests the addresses of the real
// Kafka broker, Cassandra node and Jaeger trace store that scripts/services
// starts, plus unique names so tests never share topics, groups, keyspaces
// or traced service names.
//
// A test that needs a service and cannot reach it fails with a message that
// says how to start it: `make test` always starts them all, so a skip would
// only hide a broken environment.
package testservices

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// KafkaAddrs returns the test broker's bootstrap addresses
// (PROSODY_TEST_KAFKA, comma-separated; default localhost:9094).
func KafkaAddrs() []string { return addrs("PROSODY_TEST_KAFKA", "localhost:9094") }

// CassandraNodes returns the test Cassandra contact points
// (PROSODY_TEST_CASSANDRA, comma-separated; default localhost:9042).
func CassandraNodes() []string { return addrs("PROSODY_TEST_CASSANDRA", "localhost:9042") }

func addrs(env, def string) []string {
	v := os.Getenv(env)
	if v == "" {
		v = def
	}
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// RequireKafka fails the test at once when no broker listens, rather than
// letting it time out deep inside a client library.
func RequireKafka(t testing.TB) []string {
	t.Helper()
	a := KafkaAddrs()
	requireListening(t, "Kafka", a)
	return a
}

// RequireCassandra is RequireKafka for the Cassandra node.
func RequireCassandra(t testing.TB) []string {
	t.Helper()
	a := CassandraNodes()
	requireListening(t, "Cassandra", a)
	return a
}

func requireListening(t testing.TB, name string, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		conn, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err == nil {
			conn.Close()
			return
		}
	}
	t.Fatalf("%s is not reachable at %v: start the test services with `make services-up` (or `scripts/services start`)", name, addrs)
}

// UniqueName returns prefix plus a random suffix, usable as a topic, group or
// (with underscores only) keyspace name.
func UniqueName(prefix string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}

// WaitFor polls cond every 20 ms until it holds, failing the test after d.
// Integration tests use it for outcomes that arrive asynchronously.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
