package producer

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/internal/testpki"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// A producer whose login the broker refused fails its sends at once, and
// keeps trying to connect: once the token file holds a token the broker
// accepts, sends go through, without a new producer.
func TestRefusedProducerGetsInOnceTheTokenIsRenewed(t *testing.T) {
	s := testservices.RequireSecureKafka(t)
	defer func(d time.Duration) { authRetry = d }(authRetry)
	authRetry = 100 * time.Millisecond

	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken := func(token string) {
		t.Helper()
		// Written aside and renamed, as a sidecar renews it.
		tmp := tokenFile + ".new"
		if err := os.WriteFile(tmp, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tokenFile); err != nil {
			t.Fatal(err)
		}
	}
	enc := base64.RawURLEncoding.EncodeToString
	// No subject: Kafka's unsecured validator refuses it.
	writeToken(enc([]byte(`{"alg":"none"}`)) + "." + enc(fmt.Appendf(nil, `{"iat":%d,"exp":%d}`, time.Now().Unix()-5, time.Now().Add(time.Hour).Unix())) + ".")

	p, err := New(Options{
		Brokers: []string{s.SASLSSL}, SourceSystem: "producer-auth", SendTimeout: time.Minute,
		Security: kafkasec.Settings{
			Protocol: config.ProtocolSASLSSL, Mechanism: config.MechanismOAuthBearer, TokenFile: tokenFile,
			TLS: tlsconf.Files{CA: s.CA},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	topic := testservices.UniqueName("producer-auth")
	ctx := context.Background()
	var refused error
	testservices.WaitFor(t, time.Minute, "a send refused at once", func() bool {
		start := time.Now()
		_, refused = p.Send(ctx, topic, "k", []byte(`{}`))
		return refused != nil && !errors.Is(refused, ErrSendTimeout) && time.Since(start) < 10*time.Second
	})
	t.Logf("refused: %v", refused)

	writeToken(enc([]byte(`{"alg":"none"}`)) + "." + enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d,"scope":""}`, s.Username, time.Now().Unix()-5, time.Now().Add(time.Hour).Unix())) + ".")
	createTopic(t, s, topic)
	testservices.WaitFor(t, time.Minute, "a send through after the token was renewed", func() bool {
		_, err := p.Send(ctx, topic, "k", []byte(`{}`))
		return err == nil
	})
}

// createTopic creates topic on the plaintext listener of the same broker.
func createTopic(t *testing.T, _ testservices.SecureKafka, topic string) {
	t.Helper()
	cfg := sarama.NewConfig()
	admin, err := sarama.NewClusterAdmin(testservices.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
}

// A producer whose client certificate the broker refused gets in once the
// certificate and key files are renewed in place, without a new producer:
// each connection reads them again.
func TestRefusedProducerGetsInOnceTheCertificateIsRenewed(t *testing.T) {
	s := testservices.RequireSecureKafka(t)
	defer func(d time.Duration) { authRetry = d }(authRetry)
	authRetry = 100 * time.Millisecond

	dir := t.TempDir()
	stranger, err := testpki.NewCA(dir, "stranger-ca")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	refusedCert, refusedKey, err := stranger.Issue(dir, "refused", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	install := func(cert, key string) {
		t.Helper()
		for _, f := range [][2]string{{cert, certFile}, {key, keyFile}} {
			data, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f[1], data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(refusedCert, refusedKey)

	p, err := New(Options{
		Brokers: []string{s.SSL}, SourceSystem: "producer-cert", SendTimeout: time.Minute,
		Security: kafkasec.Settings{
			Protocol: config.ProtocolSSL,
			TLS:      tlsconf.Files{CA: s.CA, Cert: certFile, Key: keyFile},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	topic := testservices.UniqueName("producer-cert")
	ctx := context.Background()
	var refused error
	testservices.WaitFor(t, time.Minute, "a send refused at once", func() bool {
		start := time.Now()
		_, refused = p.Send(ctx, topic, "k", []byte(`{}`))
		return refused != nil && !errors.Is(refused, ErrSendTimeout) && time.Since(start) < 10*time.Second
	})
	if !strings.Contains(refused.Error(), "ssl_certificate_location: ") {
		t.Fatalf("refused for another reason: %v", refused)
	}

	install(s.ClientCertificate, s.ClientKey)
	createTopic(t, s, topic)
	testservices.WaitFor(t, time.Minute, "a send through after the certificate was renewed", func() bool {
		_, err := p.Send(ctx, topic, "k", []byte(`{}`))
		return err == nil
	})
}
