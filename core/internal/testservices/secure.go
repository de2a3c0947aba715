package testservices

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// SecureKafka describes the test broker's SASL_SSL and mutual-TLS
// listeners, as scripts/services writes them to listeners.json.
type SecureKafka struct {
	SASLSSL           string `json:"sasl_ssl"` // host:port
	SSL               string `json:"ssl"`      // host:port, client certificate required
	Username          string `json:"sasl_username"`
	Password          string `json:"sasl_password"`
	CA                string `json:"ca"`
	CAKey             string `json:"ca_key"`
	ClientCertificate string `json:"client_certificate"`
	ClientKey         string `json:"client_key"`
}

// SecureKafkaFile is where the listener description is read from:
// PROSODY_TEST_KAFKA_TLS, else the default run directory of
// scripts/services.
func SecureKafkaFile() string {
	if p := os.Getenv("PROSODY_TEST_KAFKA_TLS"); p != "" {
		return p
	}
	return filepath.Join(servicesRun(), "kafka", "tls", "listeners.json")
}

// servicesRun is scripts/services' run directory.
func servicesRun() string {
	if run := os.Getenv("PROSODY_SERVICES_RUN"); run != "" {
		return run
	}
	return filepath.Join(os.TempDir(), "prosody-services")
}

// RequireSecureKafka returns the secure listeners, or skips the test when
// they are not configured: a broker started from an older template has
// only the plaintext one. A description whose listeners do not answer
// fails the test, as RequireKafka does.
func RequireSecureKafka(t testing.TB) SecureKafka {
	t.Helper()
	path := SecureKafkaFile()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("the Kafka SASL_SSL/SSL listeners are not configured (no %s): restart Kafka with `scripts/services stop kafka && scripts/services start kafka`, or set PROSODY_TEST_KAFKA_TLS", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	var s SecureKafka
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, a := range []string{s.SASLSSL, s.SSL} {
		conn, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			t.Fatalf("the Kafka listener %s named in %s does not answer: %v (start the services with `scripts/services start`)", a, path, err)
		}
		conn.Close()
	}
	return s
}

// SecureCassandra describes the test Cassandra's TLS (optional client
// encryption on its CQL port), as scripts/services writes it to tls.json.
type SecureCassandra struct {
	CQL string `json:"cql"`
	// User and Password log in to the cassandra-auth node (empty for the
	// plain one, which needs no login).
	User              string `json:"user"`
	Password          string `json:"password"`
	CA                string `json:"ca"`
	CAKey             string `json:"ca_key"`
	ClientCertificate string `json:"client_certificate"`
	ClientKey         string `json:"client_key"`
}

func secureCassandraFile() string {
	if path := os.Getenv("PROSODY_TEST_CASSANDRA_TLS"); path != "" {
		return path
	}
	return filepath.Join(servicesRun(), "cassandra", "tls", "tls.json")
}

func authCassandraFile() string {
	if path := os.Getenv("PROSODY_TEST_CASSANDRA_AUTH"); path != "" {
		return path
	}
	return filepath.Join(servicesRun(), "cassandra-auth", "tls", "tls.json")
}

// LookupAuthCassandra returns the cassandra-auth node (TLS required,
// PasswordAuthenticator) if scripts/services started one.
func LookupAuthCassandra() (SecureCassandra, bool) {
	var s SecureCassandra
	data, err := os.ReadFile(authCassandraFile())
	return s, err == nil && json.Unmarshal(data, &s) == nil
}

// RequireAuthCassandra is RequireSecureCassandra for the cassandra-auth
// node (PROSODY_TEST_CASSANDRA_AUTH, else the default run directory).
func RequireAuthCassandra(t testing.TB) SecureCassandra {
	t.Helper()
	return requireCassandraFile(t, authCassandraFile(), "cassandra-auth")
}

// LookupSecureCassandra returns Cassandra's TLS description if there is
// one, for tests that use it when they can.
func LookupSecureCassandra() (SecureCassandra, bool) {
	var s SecureCassandra
	data, err := os.ReadFile(secureCassandraFile())
	return s, err == nil && json.Unmarshal(data, &s) == nil
}

// RequireSecureCassandra is RequireSecureKafka for Cassandra's TLS
// (PROSODY_TEST_CASSANDRA_TLS, else the default run directory).
func RequireSecureCassandra(t testing.TB) SecureCassandra {
	t.Helper()
	return requireCassandraFile(t, secureCassandraFile(), "cassandra")
}

func requireCassandraFile(t testing.TB, path, service string) SecureCassandra {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("the %s node's TLS is not configured (no %s): (re)start it with `scripts/services stop %s && scripts/services start %s`", service, path, service, service)
	}
	if err != nil {
		t.Fatal(err)
	}
	var s SecureCassandra
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	requireListening(t, "Cassandra", []string{s.CQL})
	return s
}
