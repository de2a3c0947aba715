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
	run := os.Getenv("PROSODY_SERVICES_RUN")
	if run == "" {
		run = filepath.Join(os.TempDir(), "prosody-services")
	}
	return filepath.Join(run, "kafka", "tls", "listeners.json")
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
