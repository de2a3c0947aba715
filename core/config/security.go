package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prosody-events/prosody-go/core/secret"
)

// SecurityProtocol is how the client talks to Kafka brokers, with
// librdkafka's values (security.protocol), lower case.
type SecurityProtocol string

const (
	// ProtocolPlaintext is neither encrypted nor authenticated: the default.
	ProtocolPlaintext SecurityProtocol = "plaintext"
	// ProtocolSSL is TLS, authenticated by a client certificate when one is
	// configured (mutual TLS).
	ProtocolSSL SecurityProtocol = "ssl"
	// ProtocolSASLPlaintext authenticates with SASL over an unencrypted
	// connection.
	ProtocolSASLPlaintext SecurityProtocol = "sasl_plaintext"
	// ProtocolSASLSSL authenticates with SASL over TLS.
	ProtocolSASLSSL SecurityProtocol = "sasl_ssl"
)

// UsesTLS reports whether connections are encrypted.
func (p SecurityProtocol) UsesTLS() bool { return p == ProtocolSSL || p == ProtocolSASLSSL }

// UsesSASL reports whether connections authenticate with SASL.
func (p SecurityProtocol) UsesSASL() bool {
	return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL
}

// SASLMechanism is the SASL mechanism, with librdkafka's values
// (sasl.mechanism), upper case.
type SASLMechanism string

const (
	MechanismPlain       SASLMechanism = "PLAIN"
	MechanismScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	MechanismScramSHA512 SASLMechanism = "SCRAM-SHA-512"
	// MechanismOAuthBearer sends a bearer token read from
	// sasl_oauthbearer_token_file.
	MechanismOAuthBearer SASLMechanism = "OAUTHBEARER"
)

// caseFoldEnum is enumKind with the case normalised, since librdkafka users
// write "SASL_SSL" and "scram-sha-512" alike.
func caseFoldEnum[T ~string](fold func(string) string) kind[T] {
	k := enumKind[T]()
	k.text = func(s string) (T, error) { return T(fold(strings.TrimSpace(s))), nil }
	k.json = func(v any) (T, error) {
		s, err := stringKind.json(v)
		return T(fold(strings.TrimSpace(s))), err
	}
	return k
}

// secretKind reads a secret.Secret. Neither its parse errors nor the "got"
// part of a broken rule ever contain the value.
var secretKind = kind[secret.Secret]{
	schemaType: "string",
	text:       func(s string) (secret.Secret, error) { return secret.New(s), nil },
	json: func(v any) (secret.Secret, error) {
		if s, ok := v.(string); ok {
			return secret.New(s), nil
		}
		return secret.Secret{}, errors.New("must be a string (the value is not shown)")
	},
	format: func(s secret.Secret) string { return strconv.Quote(s.String()) },
}

// secretOpt is opt for a secret. Its value (used only to notice explicit
// changes, and as the schema default) is the text itself, because two
// equal secrets are not reflect.DeepEqual.
func secretOpt(name, env string, field func(*Config) *secret.Secret) option[Config] {
	o := opt(name, env, field, secretKind, secret.Secret{})
	o.value = func(c *Config) any { return field(c).Reveal() }
	o.secret = true
	return o
}

// validateSecurity checks the rules between the Kafka and Cassandra
// security options. Messages name the options involved, never a secret.
func validateSecurity(c *Config, errs *errorList) {
	validateKafkaSecurity(c, errs)
	validateCassandraSecurity(c, errs)
}

func validateKafkaSecurity(c *Config, errs *errorList) {
	p := c.SecurityProtocol
	// An unknown protocol or mechanism is reported by its own rule; the
	// rules below would only add guesses about what was meant.
	switch p {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		return
	}
	switch c.SaslMechanism {
	case "", MechanismPlain, MechanismScramSHA256, MechanismScramSHA512, MechanismOAuthBearer:
	default:
		return
	}
	if p.UsesSASL() {
		switch c.SaslMechanism {
		case "":
			errs.add("sasl_mechanism", fmt.Sprintf("must be set with security_protocol %q: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", p))
		case MechanismOAuthBearer:
			if c.SaslOauthbearerTokenFile == "" {
				errs.add("sasl_oauthbearer_token_file", "must be set with sasl_mechanism OAUTHBEARER")
			}
			if c.SaslUsername != "" {
				errs.add("sasl_username", "must not be set with sasl_mechanism OAUTHBEARER (the token authenticates)")
			}
			if c.SaslPassword.IsSet() {
				errs.add("sasl_password", "must not be set with sasl_mechanism OAUTHBEARER (the token authenticates)")
			}
		default:
			if c.SaslUsername == "" {
				errs.add("sasl_username", fmt.Sprintf("must be set with sasl_mechanism %s", c.SaslMechanism))
			}
			if !c.SaslPassword.IsSet() {
				errs.add("sasl_password", fmt.Sprintf("must be set with sasl_mechanism %s", c.SaslMechanism))
			}
		}
	} else {
		needSASL := func(option string, set bool) {
			if set {
				errs.add(option, fmt.Sprintf(`needs security_protocol "sasl_plaintext" or "sasl_ssl", got security_protocol %q`, p))
			}
		}
		needSASL("sasl_mechanism", c.SaslMechanism != "")
		needSASL("sasl_username", c.SaslUsername != "")
		needSASL("sasl_password", c.SaslPassword.IsSet())
		needSASL("sasl_oauthbearer_token_file", c.SaslOauthbearerTokenFile != "")
	}
	if c.SaslMechanism != MechanismOAuthBearer && c.SaslOauthbearerTokenFile != "" && p.UsesSASL() {
		errs.add("sasl_oauthbearer_token_file", fmt.Sprintf("is only read with sasl_mechanism OAUTHBEARER, got sasl_mechanism %s", c.SaslMechanism))
	}
	if !p.UsesTLS() {
		needTLS := func(option string, set bool) {
			if set {
				errs.add(option, fmt.Sprintf(`needs security_protocol "ssl" or "sasl_ssl", got security_protocol %q`, p))
			}
		}
		needTLS("ssl_ca_location", c.SslCaLocation != "")
		needTLS("ssl_certificate_location", c.SslCertificateLocation != "")
		needTLS("ssl_key_location", c.SslKeyLocation != "")
		needTLS("ssl_server_name", c.SslServerName != "")
		needTLS("enable_ssl_certificate_verification", !c.EnableSslCertificateVerification)
	}
	pairCertKey(errs, "", c.SslCertificateLocation, c.SslKeyLocation)
}

func validateCassandraSecurity(c *Config, errs *errorList) {
	if !c.CassandraSslEnabled {
		for _, o := range []struct {
			name string
			set  bool
		}{
			{"cassandra_ssl_ca_location", c.CassandraSslCaLocation != ""},
			{"cassandra_ssl_certificate_location", c.CassandraSslCertificateLocation != ""},
			{"cassandra_ssl_key_location", c.CassandraSslKeyLocation != ""},
			{"cassandra_ssl_server_name", c.CassandraSslServerName != ""},
			{"cassandra_enable_ssl_certificate_verification", !c.CassandraEnableSslCertificateVerification},
		} {
			if o.set {
				errs.add(o.name, "needs cassandra_ssl_enabled to be true")
			}
		}
	}
	pairCertKey(errs, "cassandra_", c.CassandraSslCertificateLocation, c.CassandraSslKeyLocation)
	// A password alone was once ignored; refused now, so that a login the
	// user meant to configure does not silently not happen.
	if c.CassandraPassword.IsSet() && c.CassandraUser == "" {
		errs.add("cassandra_password", "is set but cassandra_user is not: a Cassandra login (PasswordAuthenticator) needs both; set cassandra_user too, or unset cassandra_password")
	}
}

// pairCertKey requires a client certificate and its key together.
func pairCertKey(errs *errorList, prefix, cert, key string) {
	switch {
	case cert != "" && key == "":
		errs.add(prefix+"ssl_key_location", "must be set with "+prefix+"ssl_certificate_location (the certificate's private key)")
	case cert == "" && key != "":
		errs.add(prefix+"ssl_certificate_location", "must be set with "+prefix+"ssl_key_location (the key's certificate)")
	}
}
