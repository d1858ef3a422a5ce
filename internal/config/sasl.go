package config

import (
	"fmt"
	"strings"
)

// SASL security protocols of the one listener (Kafka's names).
const (
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// saslMechanisms are the sasl.enabled.mechanisms values Strata serves.
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// plainJAASSetting is the broker's PLAIN user list for a listener
// (Kafka's listener.name.<listener>.<mechanism>.sasl.jaas.config; the
// listener name is the security protocol in lower case).
func plainJAASSetting(proto string) string {
	return "listener.name." + strings.ToLower(proto) + ".plain.sasl.jaas.config"
}

// saslSettings are the settings only a SASL listener uses.
var saslSettings = []string{"sasl.enabled.mechanisms", plainJAASSetting(ProtocolSASLPlaintext), plainJAASSetting(ProtocolSASLSSL)}

// saslTable lists the SASL settings (Kafka's names).
var saslTable = []Setting{
	def("sasl.enabled.mechanisms", TypeList, "GSSAPI", custom("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (a non-empty subset, on a SASL_PLAINTEXT or SASL_SSL listener)", mechanismsReason),
		"SASL mechanisms the SASL listener offers: a subset of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not supported). PLAIN users come from listener.name.<listener>.plain.sasl.jaas.config; SCRAM users are managed with AlterUserScramCredentials (kafka-configs, kadm, strata user scram set)."),
	def(plainJAASSetting(ProtocolSASLPlaintext), TypePassword, "", custom("a PlainLoginModule JAAS entry", jaasReason),
		"PLAIN users of a SASL_PLAINTEXT listener, in Kafka's broker JAAS format: org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\" user_bob=\"bob-secret\"; (one user_NAME=\"password\" per user). Reported as sensitive by DescribeConfigs."),
	def(plainJAASSetting(ProtocolSASLSSL), TypePassword, "", custom("a PlainLoginModule JAAS entry", jaasReason),
		"PLAIN users of a SASL_SSL listener (same format as listener.name.sasl_plaintext.plain.sasl.jaas.config)."),
	def("connections.max.reauth.ms", TypeLong, "0", custom("0 (re-authentication is not supported)", func(v string) string {
		if strings.TrimSpace(v) != "0" {
			return "re-authentication (KIP-368) is not supported: only 0 (sessions do not expire) is allowed"
		}
		return ""
	}), "Must be 0: authenticated SASL sessions do not expire (SaslAuthenticate answers session_lifetime_ms 0) and clients never re-authenticate."),
}

// mechanismsReason checks the names only; the listener-dependent rules
// (GSSAPI, Kafka's default, is refused on a SASL listener) are in
// validateSASL.
func mechanismsReason(v string) string {
	seen := map[string]bool{}
	for _, m := range splitList(v) {
		switch m {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI":
		case "OAUTHBEARER":
			return "OAUTHBEARER is not supported (allowed: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
		default:
			return fmt.Sprintf("unknown or unsupported SASL mechanism %q (allowed: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", m)
		}
		if seen[m] {
			return fmt.Sprintf("%q is listed twice", m)
		}
		seen[m] = true
	}
	return ""
}

// jaasReason validates a PLAIN JAAS entry without revealing its secrets.
func jaasReason(v string) string {
	if v == "" {
		return ""
	}
	if _, err := ParsePlainJAAS(v); err != nil {
		return err.Error()
	}
	return ""
}

// IsSASL reports whether a security protocol authenticates with SASL.
func IsSASL(proto string) bool { return proto == ProtocolSASLPlaintext || proto == ProtocolSASLSSL }

// usesTLS reports whether a security protocol runs over TLS.
func usesTLS(proto string) bool { return proto == ProtocolSSL || proto == ProtocolSASLSSL }

// validateSASL checks the cross-setting SASL rules: a SASL listener needs
// sasl.enabled.mechanisms set to supported mechanisms and, with PLAIN, its
// listener's PLAIN JAAS entry; SASL settings that would not be used are
// rejected.
func (b *Broker) validateSASL() error {
	proto := b.ListenerProtocol()
	if !IsSASL(proto) {
		for _, n := range saslSettings {
			if b.IsSet(n) {
				return invalidf("invalid configuration: %s is set but listeners (%s) is not SASL_PLAINTEXT or SASL_SSL, so it would not be used", n, b.Get("listeners"))
			}
		}
		return nil
	}
	mechs := b.List("sasl.enabled.mechanisms")
	if len(mechs) == 0 {
		return invalidf("invalid configuration: listeners (%s) is SASL but sasl.enabled.mechanisms is empty: set it to a subset of %s", b.Get("listeners"), strings.Join(saslMechanisms, ", "))
	}
	plain := false
	for _, m := range mechs {
		if m == "GSSAPI" {
			what := "GSSAPI"
			if !b.IsSet("sasl.enabled.mechanisms") {
				what = "GSSAPI (Kafka's default)"
			}
			return invalidf("invalid value %q for configuration sasl.enabled.mechanisms: %s is not supported (Strata has no Kerberos): set sasl.enabled.mechanisms to a subset of %s",
				b.Get("sasl.enabled.mechanisms"), what, strings.Join(saslMechanisms, ", "))
		}
		plain = plain || m == "PLAIN"
	}
	own := plainJAASSetting(proto)
	for _, n := range saslSettings[1:] {
		if n != own && b.IsSet(n) {
			return invalidf("invalid configuration: %s is set but the listener is %s (its PLAIN users are in %s), so it would not be used", n, proto, own)
		}
	}
	switch {
	case plain && b.Get(own) == "":
		return invalidf("invalid configuration: sasl.enabled.mechanisms includes PLAIN but %s is not set: list the PLAIN users there (org.apache.kafka.common.security.plain.PlainLoginModule required user_NAME=\"PASSWORD\" ...;)", own)
	case !plain && b.Get(own) != "":
		return invalidf("invalid configuration: %s is set but sasl.enabled.mechanisms (%s) does not include PLAIN, so it would not be used", own, b.Get("sasl.enabled.mechanisms"))
	}
	return nil
}

// SASLMechanisms returns the mechanisms the listener serves (nil when the
// listener is not SASL).
func (b *Broker) SASLMechanisms() []string {
	if !IsSASL(b.ListenerProtocol()) {
		return nil
	}
	return b.List("sasl.enabled.mechanisms")
}

// PlainUsers returns the PLAIN users (name -> password) of the listener's
// JAAS entry (empty when PLAIN is not enabled).
func (b *Broker) PlainUsers() (map[string]string, error) {
	proto := b.ListenerProtocol()
	if !IsSASL(proto) || b.Get(plainJAASSetting(proto)) == "" {
		return map[string]string{}, nil
	}
	users, err := ParsePlainJAAS(b.Get(plainJAASSetting(proto)))
	if err != nil {
		return nil, invalidf("invalid configuration %s: %v", plainJAASSetting(proto), err)
	}
	return users, nil
}
