package config

import (
	"fmt"
	"slices"
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

// saslTable lists the SASL settings (Kafka's names).
var saslTable = []Setting{
	def("sasl.enabled.mechanisms", TypeList, "GSSAPI", custom("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (a non-empty subset, on a SASL_PLAINTEXT or SASL_SSL listener)", mechanismsReason),
		"SASL mechanisms the SASL listener offers: a subset of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not supported). PLAIN users come from listener.name.<listener>.plain.sasl.jaas.config; SCRAM users are managed with AlterUserScramCredentials (kafka-configs, kadm, strata user scram set)."),
	def(plainJAASSetting(ProtocolSASLPlaintext), TypePassword, "", custom("a PlainLoginModule JAAS entry", jaasReason),
		"PLAIN users of a SASL_PLAINTEXT listener, in Kafka's broker JAAS format: org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\" user_bob=\"bob-secret\"; (one user_NAME=\"password\" per user). Reported as sensitive by DescribeConfigs."),
	def(plainJAASSetting(ProtocolSASLSSL), TypePassword, "", custom("a PlainLoginModule JAAS entry", jaasReason),
		"PLAIN users of a SASL_SSL listener (same format as listener.name.sasl_plaintext.plain.sasl.jaas.config)."),
	def("sasl.mechanism.inter.broker.protocol", TypeString, "GSSAPI", oneOf("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"),
		"SASL mechanism brokers authenticate with to each other on a SASL inter-broker listener, with the credentials (username, password) of the listener's listener.name.<listener>.<mechanism>.sasl.jaas.config. Kafka's default GSSAPI is not supported; unset, a node with a SASL inter-broker listener does not replicate (replication factor 1 only)."),
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

// validateSASL checks the SASL rules of every client listener and of the
// inter-broker listener; SASL settings no listener would use are refused.
func (b *Broker) validateSASL() error {
	anySASL := false
	for _, l := range b.ClientListeners() {
		if err := b.validateListenerSASL(l); err != nil {
			return err
		}
		anySASL = anySASL || IsSASL(l.Protocol)
	}
	if !anySASL && b.IsSet("sasl.enabled.mechanisms") {
		return invalidf("invalid configuration: sasl.enabled.mechanisms is set but no listener in listeners (%s) is SASL_PLAINTEXT or SASL_SSL, so it would not be used", b.Get("listeners"))
	}
	return b.validateInterBrokerSASL()
}

// validateListenerSASL checks one client listener: a SASL listener needs
// supported mechanisms (listener.name.<l>.sasl.enabled.mechanisms or
// sasl.enabled.mechanisms) and, with PLAIN, its PLAIN JAAS entry with
// users; a JAAS entry or credential that nothing would use is refused.
func (b *Broker) validateListenerSASL(l Listener) error {
	if !IsSASL(l.Protocol) {
		if b.listenerSet(l.Name, "sasl.enabled.mechanisms") {
			return invalidf("invalid configuration: %s is set but listener %s is %s, not SASL_PLAINTEXT or SASL_SSL, so it would not be used", listenerKey(l.Name, "sasl.enabled.mechanisms"), l.Name, l.Protocol)
		}
		for mech := range jaasMechanisms {
			if k := listenerKey(l.Name, mech+".sasl.jaas.config"); b.listenerSet(l.Name, mech+".sasl.jaas.config") {
				return invalidf("invalid configuration: %s is set but listener %s is %s, not SASL_PLAINTEXT or SASL_SSL, so it would not be used", k, l.Name, l.Protocol)
			}
		}
		return nil
	}
	at := ""
	if len(b.ClientListeners()) > 1 {
		at = " (listener " + l.Name + ")"
	}
	mechsValue := b.ListenerValue(l.Name, "sasl.enabled.mechanisms")
	mechs := splitList(mechsValue)
	if len(mechs) == 0 {
		return invalidf("invalid configuration: listener %s is SASL but sasl.enabled.mechanisms is empty: set it to a subset of %s", l.Name, strings.Join(saslMechanisms, ", "))
	}
	plain := false
	for _, m := range mechs {
		if m == "GSSAPI" {
			what := "GSSAPI"
			if !b.listenerIsSet(l.Name, "sasl.enabled.mechanisms") {
				what = "GSSAPI (Kafka's default)"
			}
			return invalidf("invalid value %q for configuration sasl.enabled.mechanisms%s: %s is not supported (Strata has no Kerberos): set sasl.enabled.mechanisms to a subset of %s",
				mechsValue, at, what, strings.Join(saslMechanisms, ", "))
		}
		plain = plain || m == "PLAIN"
	}
	ib, ibMech := b.interBrokerSASL(l)
	own := listenerKey(l.Name, "plain.sasl.jaas.config")
	entry := b.ListenerValue(l.Name, "plain.sasl.jaas.config")
	switch {
	case plain && entry == "":
		return invalidf("invalid configuration: sasl.enabled.mechanisms of listener %s includes PLAIN but %s is not set: list the PLAIN users there (org.apache.kafka.common.security.plain.PlainLoginModule required user_NAME=\"PASSWORD\" ...;)", l.Name, own)
	case !plain && entry != "" && !(ib && ibMech == "PLAIN"):
		return invalidf("invalid configuration: %s is set but sasl.enabled.mechanisms of listener %s (%s) does not include PLAIN, so it would not be used", own, l.Name, mechsValue)
	}
	if entry != "" {
		j, err := ParseJAAS(entry, plainLoginModule)
		if err != nil {
			return invalidf("invalid value for configuration %s: %v", own, err)
		}
		if plain && len(j.Users) == 0 {
			return invalidf("invalid value for configuration %s: no users: list at least one user_NAME=\"password\"", own)
		}
		if j.Username != "" && !(ib && ibMech == "PLAIN") {
			return invalidf("invalid configuration: %s has username and password, the broker's own credentials, but they would not be used: they are read on the inter-broker listener with sasl.mechanism.inter.broker.protocol=PLAIN (listener %s is not that)", own, l.Name)
		}
	}
	for _, mech := range []string{"scram-sha-256", "scram-sha-512"} {
		if b.ListenerValue(l.Name, mech+".sasl.jaas.config") != "" && !(ib && strings.EqualFold(ibMech, mech)) {
			return invalidf("invalid configuration: %s is set but would not be used: a ScramLoginModule entry holds the broker's own credentials, read on the inter-broker listener when sasl.mechanism.inter.broker.protocol=%s",
				listenerKey(l.Name, mech+".sasl.jaas.config"), strings.ToUpper(mech))
		}
	}
	return nil
}

// interBrokerSASL reports whether l is the inter-broker listener with SASL
// and the mechanism brokers use on it ("" when
// sasl.mechanism.inter.broker.protocol is not set).
func (b *Broker) interBrokerSASL(l Listener) (bool, string) {
	if !IsSASL(l.Protocol) || !strings.EqualFold(b.interBrokerName(), l.Name) {
		return false, ""
	}
	if !b.IsSet("sasl.mechanism.inter.broker.protocol") {
		return true, ""
	}
	return true, b.Get("sasl.mechanism.inter.broker.protocol")
}

// validateInterBrokerSASL checks sasl.mechanism.inter.broker.protocol
// when it is set: the inter-broker listener is SASL, serves the mechanism
// (Kafka's KafkaConfig.validateValues rule), and holds the broker's own
// credentials in its JAAS entry for it.
func (b *Broker) validateInterBrokerSASL() error {
	if !b.IsSet("sasl.mechanism.inter.broker.protocol") {
		return nil
	}
	mech := b.Get("sasl.mechanism.inter.broker.protocol")
	l, ok := b.InterBrokerListener()
	if !ok || !IsSASL(l.Protocol) {
		return invalidf("invalid configuration: sasl.mechanism.inter.broker.protocol is set but the inter-broker listener (%s) is not SASL_PLAINTEXT or SASL_SSL, so it would not be used", b.interBrokerName())
	}
	if !slices.Contains(splitList(b.ListenerValue(l.Name, "sasl.enabled.mechanisms")), mech) {
		return invalidf("invalid configuration: sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication (%s is not in %s of listener %s)",
			mech, b.ListenerValue(l.Name, "sasl.enabled.mechanisms"), l.Name)
	}
	if _, err := b.interBrokerCredentials(l, mech); err != nil {
		return err
	}
	return nil
}

// interBrokerCredentials reads the broker's own credentials for mech on
// the inter-broker listener l: username and password of
// listener.name.<l>.<mech>.sasl.jaas.config (Kafka's broker JAAS entry,
// read by its inter-broker SASL client).
func (b *Broker) interBrokerCredentials(l Listener, mech string) (JAAS, error) {
	m := strings.ToLower(mech)
	key := listenerKey(l.Name, m+".sasl.jaas.config")
	v := b.ListenerValue(l.Name, m+".sasl.jaas.config")
	if v == "" {
		return JAAS{}, invalidf("invalid configuration: sasl.mechanism.inter.broker.protocol is %s but %s is not set: give the broker's own credentials there (%s required username=\"NAME\" password=\"PASSWORD\";)",
			mech, key, jaasMechanisms[m])
	}
	j, err := ParseJAAS(v, jaasMechanisms[m])
	if err != nil {
		return JAAS{}, invalidf("invalid value for configuration %s: %v", key, err)
	}
	if j.Username == "" {
		return JAAS{}, invalidf("invalid configuration: %s has no username and password: the broker authenticates to other brokers with them (sasl.mechanism.inter.broker.protocol=%s)", key, mech)
	}
	return j, nil
}

// SASLMechanisms returns the mechanisms the first client listener serves
// (SASLMechanismsFor).
func (b *Broker) SASLMechanisms() []string {
	ls := b.ClientListeners()
	if len(ls) == 0 {
		return nil
	}
	return b.SASLMechanismsFor(ls[0])
}

// SASLMechanismsFor returns the mechanisms listener l serves (nil when it
// is not SASL).
func (b *Broker) SASLMechanismsFor(l Listener) []string {
	if !IsSASL(l.Protocol) {
		return nil
	}
	return splitList(b.ListenerValue(l.Name, "sasl.enabled.mechanisms"))
}

// PlainUsers returns the PLAIN users of the first client listener
// (PlainUsersFor).
func (b *Broker) PlainUsers() (map[string]string, error) {
	ls := b.ClientListeners()
	if len(ls) == 0 {
		return map[string]string{}, nil
	}
	return b.PlainUsersFor(ls[0])
}

// PlainUsersFor returns the PLAIN users (name -> password) of listener
// l's JAAS entry (empty when PLAIN is not enabled there).
func (b *Broker) PlainUsersFor(l Listener) (map[string]string, error) {
	if !slices.Contains(b.SASLMechanismsFor(l), "PLAIN") {
		return map[string]string{}, nil
	}
	key := listenerKey(l.Name, "plain.sasl.jaas.config")
	j, err := ParseJAAS(b.ListenerValue(l.Name, "plain.sasl.jaas.config"), plainLoginModule)
	if err != nil {
		return nil, invalidf("invalid configuration %s: %v", key, err)
	}
	return j.Users, nil
}
