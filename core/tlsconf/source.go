package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
)

// Source gives the client configuration of each new connection, with the
// files as they are then: short-lived client certificates are renewed in
// place, and a CA bundle gains the next CA before servers move to it, so
// neither must need a new client.
//
// The files are read at each handshake (client certificate and key) or
// each configuration handed out (CA bundle) and parsed again only when
// their content changed. Reading them costs little beside a handshake,
// and unlike a modification time it cannot miss a rewrite. A file that
// cannot be read or parsed any more leaves the last good one in use, so
// that a renewal caught half-written (the certificate replaced, its key
// not yet) does not fail a connection; a client certificate is dropped
// only once it has expired.
type Source struct {
	files Files
	base  *tls.Config

	caMu   sync.Mutex
	caData []byte
	ca     *x509.CertPool // nil: the system roots

	pairMu          sync.Mutex
	certPEM, keyPEM []byte
	pair            tls.Certificate
	hasPair         bool
}

// Source reads and checks every file now, so that a missing or unusable
// one fails the client at construction, with the option named.
func (f Files) Source() (*Source, error) {
	s := &Source{files: f, base: &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         f.ServerName,
		InsecureSkipVerify: f.InsecureSkipVerify, //nolint:gosec // an explicit, documented opt-in
	}}
	if f.CA != "" {
		data, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("%s: reading the CA bundle: %w", f.option("ssl_ca_location"), err)
		}
		if s.ca, err = f.parseCA(data); err != nil {
			return nil, err
		}
		s.caData = data
	}
	switch {
	case f.Cert != "" && f.Key != "":
		if _, err := s.clientCertificate(); err != nil {
			return nil, err
		}
		s.base.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.clientCertificate()
		}
	case f.Cert != "" || f.Key != "":
		return nil, fmt.Errorf("%s and %s must be set together", f.option("ssl_certificate_location"), f.option("ssl_key_location"))
	}
	return s, nil
}

// Config returns the configuration for one new connection.
func (s *Source) Config() *tls.Config {
	cfg := s.base.Clone()
	cfg.RootCAs = s.roots()
	return cfg
}

// roots returns the CA bundle, read again if its content changed.
func (s *Source) roots() *x509.CertPool {
	if s.files.CA == "" {
		return nil
	}
	data, err := os.ReadFile(s.files.CA)
	s.caMu.Lock()
	defer s.caMu.Unlock()
	if err == nil && !bytes.Equal(data, s.caData) {
		if pool, err := s.files.parseCA(data); err == nil {
			s.ca, s.caData = pool, data
		}
	}
	return s.ca
}

// clientCertificate returns the client certificate, read again if either
// file changed. It is the GetClientCertificate of every configuration, so
// a failure here fails the handshake with this error (an *ExpiredError for
// an expired certificate), which names the option.
func (s *Source) clientCertificate() (*tls.Certificate, error) {
	certPEM, keyPEM, readErr := s.files.readKeyPair()
	s.pairMu.Lock()
	defer s.pairMu.Unlock()
	var renewErr error
	switch {
	case readErr != nil:
		renewErr = readErr
	case !s.hasPair || !bytes.Equal(certPEM, s.certPEM) || !bytes.Equal(keyPEM, s.keyPEM):
		pair, err := s.files.parseKeyPair(certPEM, keyPEM)
		if err == nil {
			err = s.files.checkValidity(pair.Leaf)
		}
		if err != nil {
			renewErr = err
			break
		}
		s.pair, s.certPEM, s.keyPEM, s.hasPair = pair, certPEM, keyPEM, true
	}
	if !s.hasPair {
		return nil, renewErr
	}
	if err := s.files.checkValidity(s.pair.Leaf); err != nil {
		// What the files hold now is the thing to fix when it is broken;
		// else the certificate has expired and was not renewed.
		if renewErr != nil {
			return nil, renewErr
		}
		return nil, err
	}
	pair := s.pair
	return &pair, nil
}
