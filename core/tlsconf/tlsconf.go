// Package tlsconf builds a crypto/tls client configuration from the PEM
// files the configuration names (a CA bundle, a client certificate and its
// key) for Kafka and Cassandra alike. Problems are found when the client is
// built, not at the first handshake, and each error names the option whose
// file is at fault; no error carries key material. The files are read
// again for each new connection (Source), so renewed certificates are used
// without a new client.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Files are the TLS options of one service.
type Files struct {
	// Prefix is put before the option names in errors: "" for Kafka,
	// "cassandra_" for Cassandra.
	Prefix string
	// CA is a PEM bundle of the CAs trusted to sign the server's
	// certificate; "" trusts the system roots.
	CA string
	// Cert and Key are the client certificate (PEM, possibly with its
	// chain) and its private key, for mutual TLS. Both or neither.
	Cert, Key string
	// ServerName overrides the name the server's certificate must carry;
	// "" means the host dialled.
	ServerName string
	// InsecureSkipVerify accepts any server certificate, for development
	// only. It is the negation of the enable_ssl_certificate_verification
	// options so that the zero value of Files verifies.
	InsecureSkipVerify bool
	// Now is the clock used to check the client certificate's validity;
	// nil means time.Now.
	Now func() time.Time
}

func (f Files) option(name string) string { return f.Prefix + name }

// Config loads the files and returns a client configuration: the CA
// bundle as read now, the client certificate read again at each handshake
// (Source). For a CA bundle read again too, use a Source.
func (f Files) Config() (*tls.Config, error) {
	s, err := f.Source()
	if err != nil {
		return nil, err
	}
	return s.Config(), nil
}

func (f Files) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// parseCA reads a CA bundle.
func (f Files) parseCA(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: %q holds no PEM certificate", f.option("ssl_ca_location"), f.CA)
	}
	return pool, nil
}

// readKeyPair reads the client certificate and key files.
func (f Files) readKeyPair() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(f.Cert); err != nil {
		return nil, nil, fmt.Errorf("%s: reading the client certificate: %w", f.option("ssl_certificate_location"), err)
	}
	if keyPEM, err = os.ReadFile(f.Key); err != nil {
		return nil, nil, fmt.Errorf("%s: reading the private key: %w", f.option("ssl_key_location"), err)
	}
	return certPEM, keyPEM, nil
}

// parseKeyPair checks a client certificate and its key.
func (f Files) parseKeyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	certOpt, keyOpt := f.option("ssl_certificate_location"), f.option("ssl_key_location")
	if block, _ := pem.Decode(certPEM); block == nil || block.Type != "CERTIFICATE" {
		return tls.Certificate{}, fmt.Errorf("%s: %q holds no PEM certificate", certOpt, f.Cert)
	}
	switch encrypted, found := encryptedKey(keyPEM); {
	case !found:
		return tls.Certificate{}, fmt.Errorf("%s: %q holds no PEM private key", keyOpt, f.Key)
	case encrypted:
		return tls.Certificate{}, fmt.Errorf("%s: encrypted private keys are not supported: %q is encrypted; give the key unencrypted and restrict the file's permissions instead", keyOpt, f.Key)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's messages describe the mismatch, never the key.
		return tls.Certificate{}, fmt.Errorf("%s: the key in %q does not fit the certificate in %q: %w", keyOpt, f.Key, f.Cert, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s: %q: %w", certOpt, f.Cert, err)
		}
	}
	return cert, nil
}

// checkValidity refuses a client certificate outside its validity period:
// the server would reject it at every handshake with an alert that does
// not say why.
func (f Files) checkValidity(leaf *x509.Certificate) error {
	switch t := f.now(); {
	case t.After(leaf.NotAfter):
		return &ExpiredError{Option: f.option("ssl_certificate_location"), Path: f.Cert, NotAfter: leaf.NotAfter}
	case t.Before(leaf.NotBefore):
		return fmt.Errorf("%s: the client certificate in %q is not valid before %s", f.option("ssl_certificate_location"), f.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// encryptedKey looks through the PEM blocks of a key file: found is false
// when there is none, encrypted true when a key is encrypted, as PKCS#8
// ("ENCRYPTED PRIVATE KEY") or in OpenSSL's legacy form (a Proc-Type
// header). Without this, tls.X509KeyPair would call such a key unparsable
// and the error would look like a certificate and key that do not match.
func encryptedKey(data []byte) (encrypted, found bool) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return false, found
		}
		found = true
		if block.Type == "ENCRYPTED PRIVATE KEY" || x509.IsEncryptedPEMBlock(block) { //nolint:staticcheck // only to say why it is refused
			return true, true
		}
	}
}

// ExpiredError reports a client certificate past its validity.
type ExpiredError struct {
	Option   string
	Path     string
	NotAfter time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("%s: the client certificate in %q expired at %s", e.Option, e.Path, e.NotAfter.UTC().Format(time.RFC3339))
}

// IsHandshakeFailure reports whether err is a TLS failure that another
// attempt with the same configuration cannot fix: the server's certificate
// was refused, or the server refused ours (a TLS alert), or the peer does
// not speak TLS at all.
func IsHandshakeFailure(err error) bool {
	var (
		unknownCA   x509.UnknownAuthorityError
		invalid     x509.CertificateInvalidError
		hostname    x509.HostnameError
		verify      *tls.CertificateVerificationError
		alert       tls.AlertError
		header      tls.RecordHeaderError
		expiredCert *ExpiredError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &header) ||
		errors.As(err, &expiredCert) || IsRemoteAlert(err)
}

// IsRemoteAlert reports whether the server ended the handshake with a TLS
// alert ("remote error: tls: bad certificate"). crypto/tls reports it as a
// net.OpError with this Op around its unexported alert type.
func IsRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}
