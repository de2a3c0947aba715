package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestSecurityRules covers the rules between the security options: each
// case names the option the error must blame and what it must say.
func TestSecurityRules(t *testing.T) {
	const pw = `"Tr0ub4dor&3"`
	cases := []struct {
		name     string
		raw      map[string]string
		option   string // "" when the configuration is valid
		fragment string
	}{
		{"sasl_ssl with SCRAM", map[string]string{"security_protocol": `"SASL_SSL"`, "sasl_mechanism": `"SCRAM-SHA-512"`, "sasl_username": `"u"`, "sasl_password": pw, "ssl_ca_location": `"ca.pem"`}, "", ""},
		{"mutual TLS", map[string]string{"security_protocol": `"ssl"`, "ssl_certificate_location": `"c.pem"`, "ssl_key_location": `"k.pem"`}, "", ""},
		{"OAUTHBEARER with a token file", map[string]string{"security_protocol": `"sasl_ssl"`, "sasl_mechanism": `"oauthbearer"`, "sasl_oauthbearer_token_file": `"t"`}, "", ""},
		{"sasl protocol without mechanism", map[string]string{"security_protocol": `"sasl_ssl"`}, "sasl_mechanism", `must be set with security_protocol "sasl_ssl"`},
		{"SCRAM without password", map[string]string{"security_protocol": `"sasl_plaintext"`, "sasl_mechanism": `"SCRAM-SHA-256"`, "sasl_username": `"u"`}, "sasl_password", "must be set with sasl_mechanism SCRAM-SHA-256"},
		{"PLAIN without user", map[string]string{"security_protocol": `"sasl_plaintext"`, "sasl_mechanism": `"PLAIN"`, "sasl_password": pw}, "sasl_username", "must be set with sasl_mechanism PLAIN"},
		{"OAUTHBEARER without token file", map[string]string{"security_protocol": `"sasl_ssl"`, "sasl_mechanism": `"OAUTHBEARER"`}, "sasl_oauthbearer_token_file", "must be set with sasl_mechanism OAUTHBEARER"},
		{"OAUTHBEARER with a password", map[string]string{"security_protocol": `"sasl_ssl"`, "sasl_mechanism": `"OAUTHBEARER"`, "sasl_oauthbearer_token_file": `"t"`, "sasl_password": pw}, "sasl_password", "must not be set with sasl_mechanism OAUTHBEARER"},
		{"token file with SCRAM", map[string]string{"security_protocol": `"sasl_ssl"`, "sasl_mechanism": `"SCRAM-SHA-256"`, "sasl_username": `"u"`, "sasl_password": pw, "sasl_oauthbearer_token_file": `"t"`}, "sasl_oauthbearer_token_file", "only read with sasl_mechanism OAUTHBEARER"},
		{"password without SASL", map[string]string{"sasl_password": pw}, "sasl_password", `needs security_protocol "sasl_plaintext" or "sasl_ssl", got security_protocol "plaintext"`},
		{"mechanism with ssl", map[string]string{"security_protocol": `"ssl"`, "sasl_mechanism": `"PLAIN"`}, "sasl_mechanism", `got security_protocol "ssl"`},
		{"CA without TLS", map[string]string{"security_protocol": `"sasl_plaintext"`, "sasl_mechanism": `"PLAIN"`, "sasl_username": `"u"`, "sasl_password": pw, "ssl_ca_location": `"ca.pem"`}, "ssl_ca_location", `needs security_protocol "ssl" or "sasl_ssl"`},
		{"verification off without TLS", map[string]string{"enable_ssl_certificate_verification": `false`}, "enable_ssl_certificate_verification", `needs security_protocol "ssl" or "sasl_ssl"`},
		{"certificate without key", map[string]string{"security_protocol": `"ssl"`, "ssl_certificate_location": `"c.pem"`}, "ssl_key_location", "must be set with ssl_certificate_location"},
		{"key without certificate", map[string]string{"security_protocol": `"ssl"`, "ssl_key_location": `"k.pem"`}, "ssl_certificate_location", "must be set with ssl_key_location"},
		{"Cassandra TLS", map[string]string{"cassandra_ssl_enabled": `true`, "cassandra_ssl_ca_location": `"ca.pem"`, "cassandra_ssl_certificate_location": `"c.pem"`, "cassandra_ssl_key_location": `"k.pem"`}, "", ""},
		{"Cassandra CA without TLS", map[string]string{"cassandra_ssl_ca_location": `"ca.pem"`}, "cassandra_ssl_ca_location", "needs cassandra_ssl_enabled to be true"},
		{"Cassandra server name without TLS", map[string]string{"cassandra_ssl_server_name": `"cassandra.internal"`}, "cassandra_ssl_server_name", "needs cassandra_ssl_enabled to be true"},
		{"Cassandra key without certificate", map[string]string{"cassandra_ssl_enabled": `true`, "cassandra_ssl_key_location": `"k.pem"`}, "cassandra_ssl_certificate_location", "must be set with cassandra_ssl_key_location"},
		{"Cassandra password without user", map[string]string{"cassandra_password": pw}, "cassandra_password", "is set but cassandra_user is not: a Cassandra login (PasswordAuthenticator) needs both; set cassandra_user too, or unset cassandra_password"},
		{"a bad protocol hides the rules that read it", map[string]string{"security_protocol": `"tls"`, "ssl_ca_location": `"ca.pem"`}, "security_protocol", `got "tls"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			_, err := FromJSON(options(t, withBase(tc.raw)))
			if tc.option == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			requireOptionError(t, err, tc.option, tc.fragment)
			if n := len(optionErrors(t, err)); n != 1 {
				t.Errorf("want exactly one error, got %d:\n%v", n, err)
			}
			if strings.Contains(err.Error(), "Tr0ub4dor") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestSecretsNeverPrinted checks every way a loaded configuration or its
// errors can be turned into text: the secrets (given through JSON and the
// environment) appear in none of them.
func TestSecretsNeverPrinted(t *testing.T) {
	const kafkaPW, cassPW = "kafka-Pa55-Xyzzy", "cass-Pa55-Plugh"
	clearEnv(t)
	t.Setenv("PROSODY_CASSANDRA_PASSWORD", cassPW)
	cfg, err := FromJSON(options(t, withBase(map[string]string{
		"security_protocol": `"sasl_ssl"`, "sasl_mechanism": `"SCRAM-SHA-512"`,
		"sasl_username": `"svc"`, "sasl_password": `"` + kafkaPW + `"`, "cassandra_user": `"c"`,
	})))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SaslPassword.Reveal() != kafkaPW || cfg.CassandraPassword.Reveal() != cassPW {
		t.Fatal("passwords not loaded")
	}
	texts := []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%+v", *cfg)}

	// Validation errors about a secret option, from JSON and from the
	// environment, name it without its value.
	_, err = FromJSON(options(t, withBase(map[string]string{"sasl_password": `"` + kafkaPW + `"`})))
	texts = append(texts, fmt.Sprint(err))
	t.Setenv("PROSODY_SASL_PASSWORD", kafkaPW)
	_, err = FromJSON(options(t, withBase(nil)))
	texts = append(texts, fmt.Sprint(err))
	requireOptionError(t, err, "sasl_password", "(from PROSODY_SASL_PASSWORD)")

	for i, s := range texts {
		if strings.Contains(s, kafkaPW) || strings.Contains(s, cassPW) {
			t.Errorf("text %d shows a password: %s", i, s)
		}
	}
}

// TestCassandraPasswordFromEnvNeedsUser checks the error a password left in
// the environment without a user gets: it names the variable the password
// came from and the option missing, and never the password.
func TestCassandraPasswordFromEnvNeedsUser(t *testing.T) {
	const pw = "cass-Env-Pa55"
	clearEnv(t)
	t.Setenv("PROSODY_CASSANDRA_PASSWORD", pw)
	_, err := FromJSON(options(t, withBase(nil)))
	oe := requireOptionError(t, err, "cassandra_password", "cassandra_user is not")
	if oe.EnvVar != "PROSODY_CASSANDRA_PASSWORD" || !strings.HasSuffix(err.Error(), "(from PROSODY_CASSANDRA_PASSWORD)") {
		t.Errorf("does not name the variable: %v", err)
	}
	if strings.Contains(err.Error(), pw) {
		t.Errorf("shows the password: %v", err)
	}
	t.Setenv("PROSODY_CASSANDRA_USER", "prosody")
	if _, err := FromJSON(options(t, withBase(nil))); err != nil {
		t.Errorf("with a user: %v", err)
	}
}
