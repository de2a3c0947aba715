// Package kafkasec applies the Kafka security options (security_protocol,
// sasl_*, ssl_*) to every sarama configuration the core builds, and
// explains authentication failures in terms of those options.
//
// The same Settings go to the consumer group, the fetch loop and the
// deferred-message loader (which use the consumer's sarama clients), the
// producer, the admin client and the topic checks, so no connection can be
// made with weaker settings than the others.
package kafkasec

import (
	"fmt"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/secret"
	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// Settings are the Kafka security options. The zero value is plaintext.
// It prints its password redacted.
type Settings struct {
	Protocol  config.SecurityProtocol
	Mechanism config.SASLMechanism
	Username  string
	Password  secret.Secret
	// TokenFile holds the OAUTHBEARER token.
	TokenFile string
	TLS       tlsconf.Files
}

// FromConfig takes the security options of a validated configuration.
func FromConfig(c *config.Config) Settings {
	return Settings{
		Protocol:  c.SecurityProtocol,
		Mechanism: c.SaslMechanism,
		Username:  c.SaslUsername,
		Password:  c.SaslPassword,
		TokenFile: c.SaslOauthbearerTokenFile,
		TLS: tlsconf.Files{
			CA:                 c.SslCaLocation,
			Cert:               c.SslCertificateLocation,
			Key:                c.SslKeyLocation,
			ServerName:         c.SslServerName,
			InsecureSkipVerify: !c.EnableSslCertificateVerification,
		},
	}
}

// Apply sets cfg's dialer and Net.SASL. It reads the certificate, key and
// token files now, so that a missing or unusable file fails the client at
// construction, with the option named; each new connection reads them
// again, so renewed files are used without a new client.
func (s Settings) Apply(cfg *sarama.Config) error {
	switch s.Protocol {
	case "", config.ProtocolPlaintext, config.ProtocolSSL, config.ProtocolSASLPlaintext, config.ProtocolSASLSSL:
	default:
		return fmt.Errorf("security_protocol: unknown protocol %q", s.Protocol)
	}
	// The dialer does the TLS handshake (sarama's own TLS stays off) and
	// watches plaintext connections, to recognise a listener of the other
	// protocol (dial.go).
	d := &dialer{cfg: cfg}
	if s.Protocol.UsesTLS() {
		src, err := s.TLS.Source()
		if err != nil {
			return err
		}
		d.tls = src
	}
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = d
	if !s.Protocol.UsesSASL() {
		return nil
	}
	sasl := &cfg.Net.SASL
	sasl.Enable = true
	sasl.Handshake = true
	sasl.Version = sarama.SASLHandshakeV1
	switch s.Mechanism {
	case config.MechanismPlain:
		sasl.Mechanism = sarama.SASLTypePlaintext
	case config.MechanismScramSHA256:
		sasl.Mechanism = sarama.SASLTypeSCRAMSHA256
		sasl.SCRAMClientGeneratorFunc = newSCRAMClient(sha256Hash)
	case config.MechanismScramSHA512:
		sasl.Mechanism = sarama.SASLTypeSCRAMSHA512
		sasl.SCRAMClientGeneratorFunc = newSCRAMClient(sha512Hash)
	case config.MechanismOAuthBearer:
		tp := newTokenFile(s.TokenFile)
		if _, err := tp.Token(); err != nil {
			return err
		}
		sasl.Mechanism = sarama.SASLTypeOAuth
		sasl.TokenProvider = tp
		return nil
	default:
		return fmt.Errorf("sasl_mechanism: must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER, got %q", s.Mechanism)
	}
	// sarama hands these to the mechanism itself; its configuration is
	// never printed or logged by this library.
	sasl.User = s.Username
	sasl.Password = s.Password.Reveal()
	return nil
}

// String describes the settings without the password, for diagnostics.
func (s Settings) String() string {
	protocol := s.Protocol
	if protocol == "" {
		protocol = config.ProtocolPlaintext
	}
	out := "security_protocol=" + string(protocol)
	if s.Protocol.UsesSASL() {
		out += fmt.Sprintf(" sasl_mechanism=%s sasl_username=%q", s.Mechanism, s.Username)
	}
	return out
}
