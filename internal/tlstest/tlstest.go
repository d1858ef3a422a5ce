// Package tlstest generates throwaway TLS material for tests: a CA, a
// server certificate for 127.0.0.1/localhost and a client certificate,
// written as PEM files in a directory the caller owns. Nothing here is
// meant for production; no key is ever checked in.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is one generated set of certificates and the files holding them.
type PKI struct {
	// CAFile holds the CA certificate (a PEM truststore).
	CAFile string
	// ServerKeystore holds the server's private key and certificate chain
	// in one PEM file (Kafka's ssl.keystore.type=PEM keystore).
	ServerKeystore string
	// ServerKeyPEM and ServerChainPEM are the same key and chain inline
	// (ssl.keystore.key, ssl.keystore.certificate.chain).
	ServerKeyPEM, ServerChainPEM string
	// ClientCertFile and ClientKeyFile are a client certificate signed by
	// the CA and its key.
	ClientCertFile, ClientKeyFile string
	// CAPEM is the CA certificate in PEM.
	CAPEM string

	pool       *x509.CertPool
	clientCert tls.Certificate
	caCert     *x509.Certificate
	caKey      *ecdsa.PrivateKey
	dir        string
	serial     int64
}

// Generate creates a CA, a server certificate (SANs 127.0.0.1, ::1,
// localhost) and a client certificate, and writes them to dir.
func Generate(dir string) (*PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "strata test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("ca cert: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("ca cert: %w", err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
	}
	srvCert, srvKey, err := leaf(2, "localhost", x509.ExtKeyUsageServerAuth,
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("server cert: %w", err)
	}
	cliCert, cliKey, err := leaf(3, "strata test client", x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("client cert: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	chain := string(srvCert) + string(caPEM)
	p := &PKI{
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerKeystore: filepath.Join(dir, "server-keystore.pem"),
		ServerKeyPEM:   string(srvKey),
		ServerChainPEM: chain,
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
		CAPEM:          string(caPEM),
		pool:           x509.NewCertPool(),
		caCert:         caCert,
		caKey:          caKey,
		dir:            dir,
		serial:         3,
	}
	p.pool.AddCert(caCert)
	if p.clientCert, err = tls.X509KeyPair(cliCert, cliKey); err != nil {
		return nil, fmt.Errorf("client key pair: %w", err)
	}
	for path, data := range map[string]string{
		p.CAFile:         string(caPEM),
		p.ServerKeystore: string(srvKey) + chain,
		p.ClientCertFile: string(cliCert),
		p.ClientKeyFile:  string(cliKey),
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ClientConfig is a client TLS config trusting the CA; withCert adds the
// client certificate (mutual TLS).
func (p *PKI) ClientConfig(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if withCert {
		c.Certificates = []tls.Certificate{p.clientCert}
	}
	return c
}

// ClientCert is one more client certificate signed by the CA.
type ClientCert struct {
	// CertFile and KeyFile hold the certificate and its key in PEM.
	CertFile, KeyFile string
	// TLS is a client config trusting the CA and presenting the certificate.
	TLS *tls.Config
}

// NewClient creates a client certificate for subject (mTLS principals:
// the broker maps the subject's distinguished name) and writes it to the
// PKI's directory. Not safe for concurrent use.
func (p *PKI) NewClient(subject pkix.Name) (*ClientCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	p.serial++
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, fmt.Errorf("client cert: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("client key pair: %w", err)
	}
	c := &ClientCert{
		CertFile: filepath.Join(p.dir, fmt.Sprintf("client-%d.pem", p.serial)),
		KeyFile:  filepath.Join(p.dir, fmt.Sprintf("client-%d-key.pem", p.serial)),
		TLS:      &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}},
	}
	if err := os.WriteFile(c.CertFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.KeyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	return c, nil
}
