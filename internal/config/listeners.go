package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Per-listener settings, Kafka's way: a setting prefixed with
// listener.name.<listener name in lower case>. applies to that listener
// only and wins over the unprefixed setting (KafkaConfig
// valuesWithPrefixOverride(ListenerName.configPrefix), the configs the
// SocketServer's channel builders are created with). SASL JAAS entries are
// per listener and mechanism: listener.name.<listener>.<mechanism in lower
// case>.sasl.jaas.config (JaasContext.loadServerContext).

// listenerPrefix starts every per-listener setting.
const listenerPrefix = "listener.name."

// listenerOverridable are the settings Strata honours per listener.
var listenerOverridable = append(append([]string(nil), sslSettings...),
	"ssl.principal.mapping.rules", "sasl.enabled.mechanisms", "max.connections")

// dynamicListenerSettings are the per-listener settings Strata applies
// while running, at the cluster default or per broker (Kafka's
// DynamicBrokerConfig.ClusterLevelListenerConfigs that Strata has:
// listener.name.<l>.max.connections).
var dynamicListenerSettings = []string{"max.connections"}

// dynamicListenerSetting reports whether name is listener.name.<l>.<s> for
// a setting s of dynamicListenerSettings.
func dynamicListenerSetting(name string) (setting string, ok bool) {
	_, setting, ok = splitListenerSetting(name)
	return setting, ok && slices.Contains(dynamicListenerSettings, setting)
}

// ListenerMaxConnections is listener l's connection limit:
// listener.name.<l>.max.connections, else max.connections (Kafka's
// ListenerConnectionQuota is configured with the listener's
// valuesWithPrefixOverride).
func (b *Broker) ListenerMaxConnections(l string) int {
	v, err := strconv.Atoi(strings.TrimSpace(b.ListenerValue(l, "max.connections")))
	if err != nil {
		return b.Int("max.connections")
	}
	return v
}

// jaasMechanisms maps the mechanism part of
// listener.name.<l>.<mechanism>.sasl.jaas.config to its login module.
var jaasMechanisms = map[string]string{
	"plain":         plainLoginModule,
	"scram-sha-256": scramLoginModule,
	"scram-sha-512": scramLoginModule,
}

// splitListenerSetting splits listener.name.<l>.<setting> into the listener
// name (as written) and the setting (ok false when name has no such
// shape).
func splitListenerSetting(name string) (listener, setting string, ok bool) {
	rest, ok := strings.CutPrefix(name, listenerPrefix)
	if !ok {
		return "", "", false
	}
	listener, setting, ok = strings.Cut(rest, ".")
	return listener, setting, ok && listener != "" && setting != ""
}

// jaasSetting returns the mechanism of "<mechanism>.sasl.jaas.config" (ok
// false for other settings).
func jaasSetting(setting string) (mech string, ok bool) {
	mech, ok = strings.CutSuffix(setting, ".sasl.jaas.config")
	return mech, ok
}

// setListenerSetting validates and stores one listener.name.<l>.<setting>
// that is not a row of the broker table. handled is false when name is not
// a per-listener setting at all.
func (b *Broker) setListenerSetting(name, value string) (handled bool, err error) {
	l, setting, ok := splitListenerSetting(name)
	if !ok {
		return false, nil
	}
	if l != strings.ToLower(l) || !validName(l) {
		return true, invalidf("%s: the listener name in a listener.name. prefix is written in lower case, as Kafka reads it (listener.name.%s.%s)", name, strings.ToLower(l), setting)
	}
	value = strings.TrimSpace(value)
	if mech, ok := jaasSetting(setting); ok {
		module, known := jaasMechanisms[mech]
		if !known {
			return true, invalidf("%s: SASL mechanism %q is not supported (JAAS entries: plain, scram-sha-256, scram-sha-512)", name, mech)
		}
		if value != "" {
			if _, err := ParseJAAS(value, module); err != nil {
				return true, invalidf("invalid value for configuration %s: %v", name, err)
			}
		}
	} else {
		if !slices.Contains(listenerOverridable, setting) {
			if hint := unsupportedHint(setting); hint != "" {
				return true, invalidf("%s: %s %s", name, setting, hint)
			}
			return true, invalidf("%s: %s cannot be set per listener in Strata (per-listener settings: %s, and <mechanism>.sasl.jaas.config)",
				name, setting, strings.Join(sortedCopy(listenerOverridable), ", "))
		}
		s := brokerIndex[setting]
		if err := s.Validate(value); err != nil {
			return true, fmt.Errorf("%s: %w", listenerPrefix+l, err)
		}
	}
	if b.perListener == nil {
		b.perListener = map[string]string{}
	}
	b.perListener[name] = value
	return true, nil
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// listenerKey is the per-listener name of setting for listener l.
func listenerKey(l, setting string) string {
	return listenerPrefix + strings.ToLower(l) + "." + setting
}

// listenerSet reports whether listener.name.<l>.<setting> was given.
func (b *Broker) listenerSet(l, setting string) bool {
	key := listenerKey(l, setting)
	if _, ok := brokerIndex[key]; ok {
		return b.explicit[key]
	}
	_, ok := b.perListener[key]
	return ok
}

// ListenerValue is setting's value on listener l: listener.name.<l>.<setting>
// when given, else the setting itself (Kafka's prefix override).
func (b *Broker) ListenerValue(l, setting string) string {
	key := listenerKey(l, setting)
	if _, ok := brokerIndex[key]; ok {
		if b.explicit[key] {
			return b.values[key]
		}
	} else if v, ok := b.perListener[key]; ok {
		return v
	}
	if _, ok := jaasSetting(setting); ok {
		return "" // JAAS entries are per listener only
	}
	return b.values[setting]
}

// listenerIsSet reports whether setting was given for listener l, either
// prefixed or unprefixed.
func (b *Broker) listenerIsSet(l, setting string) bool {
	return b.listenerSet(l, setting) || b.IsSet(setting)
}

// ListenerSettings returns every listener.name.<l>.<setting> given that
// is not a row of the broker table (names sorted), for DescribeConfigs-like
// listings; values of JAAS entries and passwords are the caller's to hide.
func (b *Broker) ListenerSettings() map[string]string {
	out := make(map[string]string, len(b.perListener))
	for k, v := range b.perListener {
		out[k] = v
	}
	return out
}

// checkListenerSettings refuses per-listener settings that would not be
// used: a listener that is not in listeners (or is a controller
// listener), ssl.* on a listener without TLS, SASL settings on a listener
// without SASL (the protocol-specific checks are in validateTLS and
// validateSASL).
func (b *Broker) checkListenerSettings() error {
	names := map[string]Listener{}
	for _, l := range b.ClientListeners() {
		names[strings.ToLower(l.Name)] = l
	}
	var keys []string
	for k := range b.perListener {
		keys = append(keys, k)
	}
	for _, k := range []string{plainJAASSetting(ProtocolSASLPlaintext), plainJAASSetting(ProtocolSASLSSL)} {
		if b.explicit[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		l, setting, _ := splitListenerSetting(k)
		if _, ok := names[l]; !ok {
			return invalidf("invalid configuration: %s is set but listeners (%s) has no client listener %s, so it would not be used",
				k, b.Get("listeners"), strings.ToUpper(l))
		}
		_ = setting
	}
	return nil
}

// InterBrokerClient is how this broker connects to other brokers: the
// inter-broker listener and, for its security protocol, the TLS client
// configuration and the SASL mechanism and credentials (Kafka's broker
// uses the same listener's settings as a client: its key store as client
// certificate, its trust store for the peers, the JAAS entry's username
// and password).
type InterBrokerClient struct {
	Listener Listener
	// TLS is the client TLS configuration (nil without TLS). With
	// ssl.endpoint.identification.algorithm=https the peer's certificate
	// must name the host dialled (the dialer sets ServerName).
	TLS *tls.Config
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 ("" without
	// SASL); Username and Password are the broker's own credentials.
	SASLMechanism      string
	Username, Password string
	// Unavailable, when set, says why this broker cannot connect to other
	// brokers (a SASL inter-broker listener without
	// sasl.mechanism.inter.broker.protocol).
	Unavailable string
}

// InterBrokerClient builds the inter-broker client settings, reading the
// key and trust stores now.
func (b *Broker) InterBrokerClient() (InterBrokerClient, error) {
	l, ok := b.InterBrokerListener()
	if !ok {
		return InterBrokerClient{}, invalidf("invalid configuration: no inter-broker listener %s among listeners (%s)", b.interBrokerName(), b.Get("listeners"))
	}
	out := InterBrokerClient{Listener: l}
	if usesTLS(l.Protocol) {
		cfg, err := b.tlsBase(l)
		if err != nil {
			return InterBrokerClient{}, err
		}
		if b.ListenerValue(l.Name, "ssl.truststore.location") != "" || b.ListenerValue(l.Name, "ssl.truststore.certificates") != "" {
			pool, err := b.trustStore(l.Name)
			if err != nil {
				return InterBrokerClient{}, err
			}
			cfg.RootCAs = pool
		}
		if b.ListenerValue(l.Name, "ssl.endpoint.identification.algorithm") == "" {
			// The chain is verified, the host name is not (Kafka with an
			// empty ssl.endpoint.identification.algorithm).
			roots := cfg.RootCAs
			cfg.InsecureSkipVerify = true
			cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
				return verifyChain(raw, roots)
			}
		}
		out.TLS = cfg
	}
	if IsSASL(l.Protocol) {
		if !b.IsSet("sasl.mechanism.inter.broker.protocol") {
			out.Unavailable = fmt.Sprintf("the inter-broker listener %s uses %s but sasl.mechanism.inter.broker.protocol is not set, so this broker has no credentials for other brokers: set it and the username and password of %s",
				l.Name, l.Protocol, listenerKey(l.Name, "<mechanism>.sasl.jaas.config"))
			return out, nil
		}
		mech := b.Get("sasl.mechanism.inter.broker.protocol")
		j, err := b.interBrokerCredentials(l, mech)
		if err != nil {
			return InterBrokerClient{}, err
		}
		out.SASLMechanism, out.Username, out.Password = mech, j.Username, j.Password
	}
	return out, nil
}

// verifyChain verifies a peer's certificate chain against roots (the
// system's when nil) without checking its host name.
func verifyChain(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return fmt.Errorf("tls: the peer sent no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return fmt.Errorf("tls: peer certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}
