package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/admin"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testpki"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/producer"
	"github.com/prosody-events/prosody-go/core/secret"
)

// securityCase is one way of connecting to the secure listeners.
type securityCase struct {
	name string
	set  func(c *config.Config)
}

// scram512 authenticates with SCRAM-SHA-512 over SASL_SSL.
func scram512(s testservices.SecureKafka, password string) func(*config.Config) {
	return func(c *config.Config) {
		c.BootstrapServers = []string{s.SASLSSL}
		c.SecurityProtocol = config.ProtocolSASLSSL
		c.SaslMechanism = config.MechanismScramSHA512
		c.SaslUsername = s.Username
		c.SaslPassword = secret.New(password)
		c.SslCaLocation = s.CA
	}
}

// mutualTLS presents a client certificate on the SSL listener.
func mutualTLS(s testservices.SecureKafka, cert, key string) func(*config.Config) {
	return func(c *config.Config) {
		c.BootstrapServers = []string{s.SSL}
		c.SecurityProtocol = config.ProtocolSSL
		c.SslCaLocation = s.CA
		c.SslCertificateLocation = cert
		c.SslKeyLocation = key
	}
}

// unsecuredJWT is a token for Kafka's unsecured OAUTHBEARER validator,
// which the test broker uses: unsigned, with the subject and an expiry.
func unsecuredJWT(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." +
		enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d,"scope":""}`, sub, time.Now().Unix()-5, exp.Unix())) + "."
}

func secureCases(t *testing.T, s testservices.SecureKafka) []securityCase {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(unsecuredJWT(s.Username, time.Now().Add(time.Hour))), 0o600); err != nil {
		t.Fatal(err)
	}
	sasl := func(m config.SASLMechanism) func(*config.Config) {
		return func(c *config.Config) {
			scram512(s, s.Password)(c)
			c.SaslMechanism = m
		}
	}
	return []securityCase{
		{"SCRAM-SHA-512 over SASL_SSL", scram512(s, s.Password)},
		{"mutual TLS", mutualTLS(s, s.ClientCertificate, s.ClientKey)},
		{"SCRAM-SHA-256 over SASL_SSL", sasl(config.MechanismScramSHA256)},
		{"PLAIN over SASL_SSL", sasl(config.MechanismPlain)},
		{"OAUTHBEARER token file over SASL_SSL", func(c *config.Config) {
			scram512(s, "")(c)
			c.SaslMechanism = config.MechanismOAuthBearer
			c.SaslUsername = ""
			c.SaslOauthbearerTokenFile = tokenFile
		}},
	}
}

// secureTopic creates a topic through the admin client over the same
// secure listener.
func secureTopic(t *testing.T, cfg *config.Config) string {
	t.Helper()
	name := testservices.UniqueName("client-secure")
	a, err := admin.New(admin.Options{Brokers: cfg.BootstrapServers, Security: kafkasec.FromConfig(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CreateTopic(context.Background(), admin.TopicSpec{Name: name, Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestSecureKafkaEndToEnd sends through the producer and receives through
// a consumer group (its fetch loop, the admin client and the topic check
// included) over each secure listener, with a timer per key so that the
// timer path runs too: over TLS with a login to the cassandra-auth node
// when scripts/services started it.
func TestSecureKafkaEndToEnd(t *testing.T) {
	s := testservices.RequireSecureKafka(t)
	testservices.RequireCassandra(t)
	cassandraTLS := func(*config.Config) {}
	if cs, ok := testservices.LookupAuthCassandra(); ok {
		cassandraTLS = func(c *config.Config) {
			c.CassandraNodes = []string{cs.CQL}
			c.CassandraSslEnabled = true
			c.CassandraSslCaLocation = cs.CA
			c.CassandraUser = cs.User
			c.CassandraPassword = secret.New(cs.Password)
		}
	} else if cs, ok := testservices.LookupSecureCassandra(); ok {
		t.Log("no cassandra-auth node: timers over TLS without a login")
		cassandraTLS = func(c *config.Config) {
			c.CassandraNodes = []string{cs.CQL}
			c.CassandraSslEnabled = true
			c.CassandraSslCaLocation = cs.CA
		}
	} else {
		t.Log("Cassandra has no TLS description: timers use its plaintext connection")
	}
	for _, sc := range secureCases(t, s) {
		t.Run(sc.name, func(t *testing.T) {
			base := newConfig(t, target{"kafka", false}, sc.set)
			topic := secureTopic(t, base)
			cfg := newConfig(t, target{"kafka", false}, sc.set, cassandraTLS, func(c *config.Config) {
				c.GroupID = testservices.UniqueName("g-secure")
				c.SubscribedTopics = []string{topic}
				c.SendTimeout = config.Some(30 * time.Second)
			})
			c := newClient(t, cfg)
			// Another client sends: a consumer skips what its own source
			// system wrote.
			sender := newClient(t, newConfig(t, target{"kafka", false}, sc.set, func(c *config.Config) {
				c.SourceSystem = "secure-sender"
				c.SendTimeout = config.Some(30 * time.Second)
			}))

			const n = 20
			var mu sync.Mutex
			got, fired := map[string]bool{}, map[string]bool{}
			h := event.HandlerFuncs{
				Message: func(ctx *event.Context, m *event.Message) error {
					mu.Lock()
					got[m.Key] = true
					mu.Unlock()
					return ctx.Schedule(time.Now().Add(time.Second))
				},
				Timer: func(ctx *event.Context, tm *event.Timer) error {
					mu.Lock()
					fired[tm.Key] = true
					mu.Unlock()
					return nil
				},
			}
			if err := c.Subscribe(h); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range n {
				if err := sender.Send(ctx, topic, fmt.Sprintf("k%d", i), []byte(`{"i":1}`)); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			count := func(m map[string]bool) func() bool {
				return func() bool { mu.Lock(); defer mu.Unlock(); return len(m) == n }
			}
			waitFor(t, time.Minute, "every message consumed", count(got))
			waitFor(t, time.Minute, "every timer fired", count(fired))
			if err := c.Unsubscribe(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSecureKafkaFailsFast checks that settings the broker refuses give
// one clear error naming the setting, quickly, from every entry point:
// creating the admin client, sending and subscribing.
func TestSecureKafkaFailsFast(t *testing.T) {
	s := testservices.RequireSecureKafka(t)
	dir := t.TempDir()
	otherCA, err := testpki.NewCA(dir, "unknown-ca")
	if err != nil {
		t.Fatal(err)
	}
	servicesCA, err := testpki.LoadCA(s.CA, s.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	oldCert, oldKey, err := servicesCA.Issue(dir, "expired-client", now.Add(-48*time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	strangerCert, strangerKey, err := otherCA.Issue(dir, "stranger", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	const wrongPassword = "definitely-Not-The-Password-42"
	cases := []struct {
		name   string
		set    func(*config.Config)
		option string // the setting the error must name
		reason string
	}{
		{"wrong password", scram512(s, wrongPassword), "sasl_username / sasl_password", "refused the SCRAM-SHA-512 credentials"},
		{"unknown CA", func(c *config.Config) {
			scram512(s, s.Password)(c)
			c.SslCaLocation = otherCA.CertPath
		}, "ssl_ca_location", "not signed by a trusted CA"},
		{"expired client certificate", mutualTLS(s, oldCert, oldKey), "ssl_certificate_location", "expired at"},
		{"no client certificate", func(c *config.Config) {
			mutualTLS(s, "", "")(c)
		}, "ssl_certificate_location", "requires a client certificate, and none is set"},
		{"client certificate from an unknown CA", mutualTLS(s, strangerCert, strangerKey), "ssl_certificate_location", "the broker refused the client certificate"},
		// A listener of the other protocol hangs up or answers in TLS:
		// not a broker that is down, to be retried for ever.
		{"TLS client at the plaintext listener", func(c *config.Config) {
			mutualTLS(s, s.ClientCertificate, s.ClientKey)(c)
			c.BootstrapServers = testservices.KafkaAddrs()
		}, "security_protocol", "did not answer a TLS handshake; is security_protocol right?"},
		{"SASL_PLAINTEXT client at the SASL_SSL listener", func(c *config.Config) {
			scram512(s, s.Password)(c)
			c.SecurityProtocol = config.ProtocolSASLPlaintext
			c.SslCaLocation = ""
		}, "security_protocol", "answered with TLS; is security_protocol right?"},
		{"plaintext client at the SSL listener", func(c *config.Config) {
			c.BootstrapServers = []string{s.SSL}
		}, "security_protocol", "answered with TLS; is security_protocol right?"},
	}
	const bound = 20 * time.Second
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error, took time.Duration) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s succeeded", what)
				}
				msg := err.Error()
				if !strings.Contains(msg, tc.option+": ") || !strings.Contains(msg, tc.reason) {
					t.Errorf("%s: error does not name %q (%q):\n%v", what, tc.option, tc.reason, err)
				}
				if errors.Is(err, producer.ErrSendTimeout) {
					t.Errorf("%s: waited out the send timeout instead of failing: %v", what, err)
				}
				if took > bound {
					t.Errorf("%s took %v", what, took)
				}
				if strings.Contains(msg, wrongPassword) || strings.Contains(msg, s.Password) {
					t.Errorf("%s: the error shows a password", what)
				}
				t.Logf("%s failed in %v: %v", what, took.Round(time.Millisecond), err)
			}
			cfg := newConfig(t, target{"kafka", false}, tc.set, func(c *config.Config) {
				c.GroupID = testservices.UniqueName("g-refused")
				c.SubscribedTopics = []string{"refused-topic"}
				c.SendTimeout = config.Some(time.Minute)
			})

			start := time.Now()
			a, err := admin.New(admin.Options{Brokers: cfg.BootstrapServers, Security: kafkasec.FromConfig(cfg)})
			if a != nil {
				a.Close()
			}
			check("admin.New", err, time.Since(start))

			start = time.Now()
			c, err := New(cfg, WithLogger(quietLogger()))
			if err != nil {
				// Settings refused without the network (an expired
				// certificate) stop the client being built at all.
				check("New", err, time.Since(start))
				return
			}
			t.Cleanup(func() { closeClient(t, c) })
			start = time.Now()
			err = c.Send(context.Background(), "refused-topic", "k", []byte(`{}`))
			check("Send", err, time.Since(start))

			start = time.Now()
			err = c.Subscribe(event.HandlerFuncs{})
			check("Subscribe", err, time.Since(start))
		})
	}
}

// TestCassandraTLSFiles checks the mapping of the cassandra_ssl_* options:
// certificates are verified unless verification is explicitly turned off.
func TestCassandraTLSFiles(t *testing.T) {
	if f := cassandraTLS(&config.Config{}); f != nil {
		t.Errorf("TLS off gives %+v", f)
	}
	for _, verify := range []bool{true, false} {
		f := cassandraTLS(&config.Config{CassandraSslEnabled: true, CassandraEnableSslCertificateVerification: verify})
		if f == nil || f.InsecureSkipVerify == verify || f.Prefix != "cassandra_" {
			t.Errorf("cassandra_enable_ssl_certificate_verification %v gives %+v", verify, f)
		}
	}
	f := cassandraTLS(&config.Config{CassandraSslEnabled: true, CassandraEnableSslCertificateVerification: true, CassandraSslServerName: "cassandra.internal"})
	if f.ServerName != "cassandra.internal" {
		t.Errorf("cassandra_ssl_server_name gives ServerName %q", f.ServerName)
	}
}
