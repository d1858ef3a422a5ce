package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
)

// Security protocols of the one listener (Kafka's names).
const (
	ProtocolPlaintext = "PLAINTEXT"
	ProtocolSSL       = "SSL"
)

// tlsProtocols maps Kafka's ssl.enabled.protocols names to Go's versions.
var tlsProtocols = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// sslSettings are the settings that only an SSL listener uses.
var sslSettings = []string{
	"ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols", "ssl.key.password",
	"ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location", "ssl.keystore.type",
	"ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.type",
	"ssl.endpoint.identification.algorithm",
}

// sslTable lists the TLS settings (Kafka's names; PEM keystores only,
// KIP-651).
var sslTable = []Setting{
	def("ssl.keystore.type", TypeString, "PEM", custom("PEM", pemOnly("keystore")),
		"Format of the key store. Only PEM is supported (Kafka's KIP-651); JKS and PKCS12 key stores are rejected: convert them to PEM."),
	def("ssl.keystore.location", TypeString, "", anyValue,
		"PEM file holding the listener's unencrypted private key and its certificate chain (leaf first). Alternative to ssl.keystore.key + ssl.keystore.certificate.chain."),
	def("ssl.keystore.key", TypePassword, "", anyValue,
		"The listener's unencrypted private key in PEM, inline (with ssl.keystore.certificate.chain; instead of ssl.keystore.location). Reported as sensitive by DescribeConfigs."),
	def("ssl.keystore.certificate.chain", TypePassword, "", anyValue,
		"The listener's certificate chain in PEM, leaf first, inline (with ssl.keystore.key)."),
	def("ssl.key.password", TypePassword, "", custom("empty (encrypted private keys are not supported)", func(v string) string {
		if v != "" {
			return "encrypted private keys are not supported: decrypt the key (openssl pkey -in key.pem -out key-plain.pem) and leave ssl.key.password empty"
		}
		return ""
	}), "Must be empty: Strata reads unencrypted PEM private keys only."),
	def("ssl.truststore.type", TypeString, "PEM", custom("PEM", pemOnly("truststore")),
		"Format of the trust store. Only PEM is supported; JKS and PKCS12 trust stores are rejected: convert them to PEM."),
	def("ssl.truststore.location", TypeString, "", anyValue,
		"PEM file of CA certificates that client certificates are verified against (needs ssl.client.auth requested or required)."),
	def("ssl.truststore.certificates", TypePassword, "", anyValue,
		"CA certificates in PEM, inline (instead of ssl.truststore.location)."),
	def("ssl.client.auth", TypeString, "none", oneOf("none", "requested", "required"),
		"Client authentication on the SSL listener: none; requested (a client certificate is asked for and verified if given); required (connections without a valid client certificate are refused)."),
	def("ssl.enabled.protocols", TypeList, "TLSv1.2,TLSv1.3", subsetOf("TLSv1.2", "TLSv1.3"),
		"TLS versions the SSL listener accepts. Older versions are not supported."),
	def("ssl.endpoint.identification.algorithm", TypeString, "https", oneOf("https", ""),
		"How a broker checks the certificate of another broker it connects to on a TLS inter-broker listener: https (Kafka's default) checks that the certificate names the host the peer advertises; empty checks the chain only."),
	def("ssl.cipher.suites", TypeList, "", custom("empty (Go's defaults), or TLS 1.2 cipher suite names (IANA, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", cipherReason),
		"TLS 1.2 cipher suites the SSL listener accepts, by IANA name; empty means Go's secure defaults. TLS 1.3 suites are not configurable (all of Go's are enabled)."),
}

// pemOnly rejects every store type but PEM, saying what to do.
func pemOnly(store string) func(string) string {
	return func(v string) string {
		if v == "PEM" {
			return ""
		}
		return fmt.Sprintf("only PEM %ss are supported (JKS and PKCS12 are not): convert the %s to PEM", store, store)
	}
}

// cipherSuiteIDs maps Go's secure TLS 1.2 cipher suite names to their ids.
func cipherSuiteIDs() (tls12 map[string]uint16, tls13 map[string]bool) {
	tls12, tls13 = map[string]uint16{}, map[string]bool{}
	for _, cs := range tls.CipherSuites() {
		only13 := true
		for _, v := range cs.SupportedVersions {
			if v != tls.VersionTLS13 {
				only13 = false
			}
		}
		if only13 {
			tls13[cs.Name] = true
		} else {
			tls12[cs.Name] = cs.ID
		}
	}
	return tls12, tls13
}

// cipherReason validates ssl.cipher.suites.
func cipherReason(v string) string {
	tls12, tls13 := cipherSuiteIDs()
	insecure := map[string]bool{}
	for _, cs := range tls.InsecureCipherSuites() {
		insecure[cs.Name] = true
	}
	for _, name := range splitList(v) {
		switch {
		case tls12[name] != 0:
		case tls13[name]:
			return fmt.Sprintf("%s is a TLS 1.3 suite: TLS 1.3 suites are not configurable (all are enabled); list TLS 1.2 suites only", name)
		case insecure[name]:
			return fmt.Sprintf("%s is an insecure cipher suite and is not supported", name)
		default:
			return fmt.Sprintf("unknown cipher suite %q (use IANA names of TLS 1.2 suites, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", name)
		}
	}
	return ""
}

// ListenerProtocol is the security protocol of the first client listener
// (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), through
// listener.security.protocol.map.
func (b *Broker) ListenerProtocol() string {
	if ls := b.ClientListeners(); len(ls) > 0 {
		return ls[0].Protocol
	}
	return listenerProtocol(b.Get("listeners"))
}

// listenerProtocol returns the part before "://" upper-cased ("" if none).
func listenerProtocol(v string) string {
	p, _, ok := strings.Cut(strings.TrimSpace(v), "://")
	if !ok {
		return ""
	}
	return strings.ToUpper(p)
}

// validateTLS checks the TLS rules of every client listener (its own
// listener.name.<l>.ssl.* settings, else the unprefixed ones) without
// reading any file; ssl.* settings no listener would use are refused.
func (b *Broker) validateTLS() error {
	anyTLS := false
	for _, l := range b.ClientListeners() {
		if err := b.validateListenerTLS(l); err != nil {
			return err
		}
		anyTLS = anyTLS || usesTLS(l.Protocol)
	}
	if !anyTLS {
		for _, n := range sslSettings {
			if b.IsSet(n) {
				return invalidf("invalid configuration: %s is set but no listener in listeners (%s) is SSL or SASL_SSL, so it would not be used", n, b.Get("listeners"))
			}
		}
	}
	return nil
}

// validateListenerTLS checks one client listener: an SSL listener needs
// one key store, and a trust store exactly when it verifies certificates
// (clients', with ssl.client.auth; other brokers', on the inter-broker
// listener); a listener without TLS refuses its own ssl.* settings.
func (b *Broker) validateListenerTLS(l Listener) error {
	at := ""
	if len(b.ClientListeners()) > 1 {
		at = " (listener " + l.Name + ")"
	}
	if !usesTLS(l.Protocol) {
		for _, n := range sslSettings {
			if b.listenerSet(l.Name, n) {
				return invalidf("invalid configuration: %s is set but listener %s is %s, not SSL or SASL_SSL, so it would not be used", listenerKey(l.Name, n), l.Name, l.Protocol)
			}
		}
		return nil
	}
	get := func(n string) string { return b.ListenerValue(l.Name, n) }
	loc, key, chain := get("ssl.keystore.location"), get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
	switch {
	case loc != "" && (key != "" || chain != ""):
		return invalidf("invalid configuration%s: set either ssl.keystore.location or ssl.keystore.key with ssl.keystore.certificate.chain, not both", at)
	case loc == "" && key == "" && chain == "" && at == "":
		return invalidf("invalid configuration: listeners (%s) uses TLS but no key store is set: set ssl.keystore.location (a PEM file with the private key and certificate chain) or ssl.keystore.key and ssl.keystore.certificate.chain", b.Get("listeners"))
	case loc == "" && key == "" && chain == "":
		return invalidf("invalid configuration: listener %s (%s) uses TLS but no key store is set: set ssl.keystore.location (a PEM file with the private key and certificate chain) or ssl.keystore.key and ssl.keystore.certificate.chain (or their %s forms)",
			l.Name, l.Protocol, listenerKey(l.Name, "ssl.*"))
	case loc == "" && (key == "" || chain == ""):
		return invalidf("invalid configuration%s: ssl.keystore.key and ssl.keystore.certificate.chain must be set together", at)
	}
	tloc, tcerts := get("ssl.truststore.location"), get("ssl.truststore.certificates")
	if tloc != "" && tcerts != "" {
		return invalidf("invalid configuration%s: set either ssl.truststore.location or ssl.truststore.certificates, not both", at)
	}
	auth := get("ssl.client.auth")
	if auth != "none" && tloc == "" && tcerts == "" {
		return invalidf("invalid configuration%s: ssl.client.auth=%s needs a trust store: set ssl.truststore.location or ssl.truststore.certificates (PEM CA certificates)", at, auth)
	}
	// A trust store on the inter-broker listener of a cluster node also
	// verifies the brokers it connects to.
	interBroker := strings.EqualFold(b.interBrokerName(), l.Name) && b.kraftConfigured()
	if auth == "none" && (tloc != "" || tcerts != "") && !interBroker {
		return invalidf("invalid configuration%s: a trust store is set but ssl.client.auth=none, so it would not be used: set ssl.client.auth to requested or required, or remove the trust store", at)
	}
	protos := splitList(get("ssl.enabled.protocols"))
	if len(protos) == 1 && protos[0] == "TLSv1.3" && len(splitList(get("ssl.cipher.suites"))) > 0 {
		return invalidf("invalid configuration%s: ssl.cipher.suites applies to TLS 1.2 only, but ssl.enabled.protocols is TLSv1.3: it would not be used", at)
	}
	return nil
}

// ServerTLS returns the TLS configuration of the first client listener
// (ServerTLSFor).
func (b *Broker) ServerTLS() (*tls.Config, error) {
	ls := b.ClientListeners()
	if len(ls) == 0 {
		return nil, nil
	}
	return b.ServerTLSFor(ls[0])
}

// ServerTLSFor returns the TLS configuration of client listener l, or nil
// for a PLAINTEXT or SASL_PLAINTEXT listener (SASL_SSL uses the SSL
// settings). It reads the key and trust stores now (no reload); missing,
// unreadable, encrypted or mismatched key material is an error naming the
// setting.
func (b *Broker) ServerTLSFor(l Listener) (*tls.Config, error) {
	if err := b.validateListenerTLS(l); err != nil {
		return nil, err
	}
	if !usesTLS(l.Protocol) {
		return nil, nil
	}
	cfg, err := b.tlsBase(l)
	if err != nil {
		return nil, err
	}
	switch b.ListenerValue(l.Name, "ssl.client.auth") {
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return cfg, nil
	}
	pool, err := b.trustStore(l.Name)
	if err != nil {
		return nil, err
	}
	cfg.ClientCAs = pool
	return cfg, nil
}

// tlsBase is listener l's key store, versions and cipher suites (the parts
// its server and the broker's inter-broker client share).
func (b *Broker) tlsBase(l Listener) (*tls.Config, error) {
	get := func(n string) string { return b.ListenerValue(l.Name, n) }
	cert, err := b.keyStore(l.Name)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS12
	for _, p := range splitList(get("ssl.enabled.protocols")) {
		v := tlsProtocols[p] // validated by the table
		cfg.MinVersion, cfg.MaxVersion = min(cfg.MinVersion, v), max(cfg.MaxVersion, v)
	}
	tls12, _ := cipherSuiteIDs()
	suites := splitList(get("ssl.cipher.suites"))
	for _, name := range suites {
		cfg.CipherSuites = append(cfg.CipherSuites, tls12[name])
	}
	if err := suitesFitKey(suites, cert); err != nil {
		return nil, err
	}
	return cfg, nil
}

// keyStore loads the listener's private key and certificate chain.
func (b *Broker) keyStore(l string) (tls.Certificate, error) {
	var keyPEM, chainPEM []byte
	var where string
	if loc := b.ListenerValue(l, "ssl.keystore.location"); loc != "" {
		data, err := os.ReadFile(loc)
		if err != nil {
			return tls.Certificate{}, invalidf("ssl.keystore.location: cannot read key store: %v", err)
		}
		keyPEM, chainPEM, where = data, data, fmt.Sprintf("ssl.keystore.location (%s)", loc)
	} else {
		keyPEM, chainPEM = []byte(b.ListenerValue(l, "ssl.keystore.key")), []byte(b.ListenerValue(l, "ssl.keystore.certificate.chain"))
		where = "ssl.keystore.key / ssl.keystore.certificate.chain"
	}
	if !hasBlock(chainPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return tls.Certificate{}, invalidf("%s: no PEM CERTIFICATE block found (the key store must hold the certificate chain, leaf first)", where)
	}
	if encryptedKey(keyPEM) {
		return tls.Certificate{}, invalidf("%s: the private key is encrypted, which is not supported: decrypt it (openssl pkey -in key.pem -out key-plain.pem)", where)
	}
	if !hasBlock(keyPEM, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
		return tls.Certificate{}, invalidf("%s: no PEM PRIVATE KEY block found (the key store must hold the unencrypted private key)", where)
	}
	cert, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, invalidf("%s: invalid key store: %v", where, err)
	}
	return cert, nil
}

// suitesFitKey checks that at least one listed TLS 1.2 suite can be used
// with the certificate's key (ECDSA suites need an ECDSA or Ed25519 key,
// RSA suites an RSA key); otherwise no TLS 1.2 client could connect.
func suitesFitKey(suites []string, cert tls.Certificate) error {
	if len(suites) == 0 {
		return nil
	}
	want := "_RSA_"
	switch cert.PrivateKey.(type) {
	case *ecdsa.PrivateKey, ed25519.PrivateKey:
		want = "_ECDSA_"
	}
	for _, s := range suites {
		if strings.Contains(s, want) {
			return nil
		}
	}
	return invalidf("invalid value %q for configuration ssl.cipher.suites: no suite can be used with the key store's %s key (list a suite with %s in its name)",
		strings.Join(suites, ","), strings.Trim(want, "_"), want)
}

// trustStore loads the CA certificates client certificates are checked
// against.
func (b *Broker) trustStore(l string) (*x509.CertPool, error) {
	data := []byte(b.ListenerValue(l, "ssl.truststore.certificates"))
	where := "ssl.truststore.certificates"
	if loc := b.ListenerValue(l, "ssl.truststore.location"); loc != "" {
		var err error
		if data, err = os.ReadFile(loc); err != nil {
			return nil, invalidf("ssl.truststore.location: cannot read trust store: %v", err)
		}
		where = fmt.Sprintf("ssl.truststore.location (%s)", loc)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, invalidf("%s: invalid certificate: %v", where, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, invalidf("%s: no PEM CERTIFICATE block found", where)
	}
	return pool, nil
}

// hasBlock reports whether data holds a PEM block whose type matches.
func hasBlock(data []byte, match func(string) bool) bool {
	for rest := data; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return false
		}
		if match(blk.Type) {
			return true
		}
	}
}

// encryptedKey reports whether data holds a PKCS#8 encrypted key or a
// legacy OpenSSL encrypted PEM key (Proc-Type: 4,ENCRYPTED).
func encryptedKey(data []byte) bool {
	return hasBlock(data, func(t string) bool { return t == "ENCRYPTED PRIVATE KEY" }) ||
		bytes.Contains(data, []byte("Proc-Type: 4,ENCRYPTED"))
}

// kraftConfigured reports whether the KRaft settings were given (a node
// of a cluster, which dials other brokers).
func (b *Broker) kraftConfigured() bool {
	return b.IsSet("process.roles") || b.IsSet("controller.quorum.voters") || b.IsSet("controller.listener.names")
}
