package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Kafka's KRaft and listener settings, with Kafka's meaning (KRaftConfigs,
// SocketServerConfigs, KafkaConfig.validateValues). docs/cluster.md
// describes how Strata runs them (an embedded etcd member on the
// controller listener).

// Roles of process.roles.
const (
	RoleBroker     = "broker"
	RoleController = "controller"
)

// defaultProtocolMap is listener.security.protocol.map's default: every
// security protocol name maps to itself (SocketServerConfigs).
const defaultProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

var kraftTable = []Setting{
	def("process.roles", TypeList, "broker,controller", custom("broker, controller, or broker,controller", rolesReason),
		"The roles of this node (KRaft): broker serves Kafka clients, controller runs a member of the cluster's metadata store (embedded etcd) on the controller listener. Kafka requires it; Strata defaults to a combined node so that zero configuration is a one-node cluster."),
	def("controller.quorum.voters", TypeList, "", custom("id@host:port,... (the controllers' controller listeners)", votersReason),
		"The controllers: id@host:port of each one's controller listener, which is both its metadata-store peer address and the endpoint brokers' metadata clients dial. Unset (zero configuration): the node is its own only voter, on a loopback controller listener chosen at start (docs/cluster.md)."),
	def("controller.listener.names", TypeList, "", custom("listener names", listenerNamesReason),
		"Names of the controller listeners among listeners (on controllers), or of the controllers' listener (on broker-only nodes, where they must not appear in listeners). Required with process.roles, as Kafka."),
	def("listener.security.protocol.map", TypeString, defaultProtocolMap, custom("NAME:PROTOCOL,... with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", protocolMapReason),
		"Security protocol of each listener name. When it is not set, controller listeners map to PLAINTEXT (as Kafka in KRaft mode)."),
	def("inter.broker.listener.name", TypeString, "", custom("a listener name", optionalNameReason),
		"Listener brokers use to reach each other (replica fetchers, transaction markers, transaction verification). Empty: the listener named like security.inter.broker.protocol (Kafka's rule); Strata also takes a node's only client listener."),
	def("security.inter.broker.protocol", TypeString, "PLAINTEXT", oneOf(ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL),
		"Security protocol brokers use to reach each other: the inter-broker listener is the one of that name (set this or inter.broker.listener.name, not both)."),
	def("broker.rack", TypeString, "", anyValue,
		"Rack of this broker, used to spread a partition's replicas over racks."),
	def("broker.session.timeout.ms", TypeInt, "9000", atLeast(1000),
		"How long a broker stays registered without renewing its session (its metadata-store lease). A broker that has not renewed for two thirds of it stops acting as leader of replicated partitions (docs/cluster.md, Fencing)."),
	def("broker.heartbeat.interval.ms", TypeInt, "2000", atLeast(100),
		"How often a broker renews its session."),
	def("metadata.log.dir", TypeString, "", anyValue,
		"Directory of the controller's metadata store (embedded etcd, under __strata_metadata/etcd). Empty: the first of log.dirs."),
}

func rolesReason(v string) string {
	items := splitList(v)
	if len(items) == 0 {
		return "must not be empty"
	}
	seen := map[string]bool{}
	for _, r := range items {
		if r != RoleBroker && r != RoleController {
			return fmt.Sprintf("unknown role %q (broker or controller)", r)
		}
		if seen[r] {
			return "duplicate role names found"
		}
		seen[r] = true
	}
	return ""
}

// Voter is one controller of controller.quorum.voters.
type Voter struct {
	ID   int32
	Host string
	Port int
}

func votersReason(v string) string {
	_, err := parseVoters(v)
	if err != nil {
		return err.Error()
	}
	return ""
}

func parseVoters(v string) ([]Voter, error) {
	var out []Voter
	seen := map[int32]bool{}
	for _, item := range splitList(v) {
		idStr, addr, ok := strings.Cut(item, "@")
		id, err := strconv.ParseInt(idStr, 10, 32)
		if !ok || err != nil || id < 0 {
			return nil, fmt.Errorf("entry %q is not id@host:port", item)
		}
		host, portStr, err := net.SplitHostPort(addr)
		port, perr := strconv.Atoi(portStr)
		if err != nil || host == "" || perr != nil || port <= 0 || port > 65535 {
			return nil, fmt.Errorf("entry %q is not id@host:port with a port from 1 to 65535", item)
		}
		if seen[int32(id)] {
			return nil, fmt.Errorf("node %d is listed twice", id)
		}
		seen[int32(id)] = true
		out = append(out, Voter{ID: int32(id), Host: host, Port: port})
	}
	return out, nil
}

func validName(n string) bool {
	if n == "" {
		return false
	}
	for _, c := range n {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func listenerNamesReason(v string) string {
	for _, n := range splitList(v) {
		if !validName(n) {
			return fmt.Sprintf("%q is not a listener name", n)
		}
	}
	return ""
}

func optionalNameReason(v string) string {
	if v != "" && !validName(v) {
		return fmt.Sprintf("%q is not a listener name", v)
	}
	return ""
}

func protocolMapReason(v string) string {
	_, err := parseProtocolMap(v)
	if err != nil {
		return err.Error()
	}
	return ""
}

func parseProtocolMap(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, item := range splitList(v) {
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || !validName(name) {
			return nil, fmt.Errorf("entry %q is not NAME:PROTOCOL", item)
		}
		if proto != ProtocolPlaintext && proto != ProtocolSSL && !IsSASL(proto) {
			return nil, fmt.Errorf("invalid security protocol `%s` for listener %s", proto, name)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener %s is mapped twice", name)
		}
		m[name] = proto
	}
	return m, nil
}

// Listener is one entry of listeners or advertised.listeners.
type Listener struct {
	Name     string // upper-cased, as Kafka's ListenerName.normalised
	Host     string
	Port     int
	Protocol string // from listener.security.protocol.map
}

// Addr is host:port.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// listenersSyntax checks "NAME://host:port,..." without the protocol map:
// names valid and distinct (Kafka's listenerListToEndPoints).
func listenersSyntax(v string, required, advertised bool) string {
	items := splitList(v)
	if len(items) == 0 {
		if required {
			return "must not be empty"
		}
		return ""
	}
	seen := map[string]bool{}
	for _, it := range items {
		name, hp, ok := strings.Cut(it, "://")
		name = strings.ToUpper(name)
		if !ok || !validName(name) {
			return fmt.Sprintf("%q must look like NAME://host:port (NAME a listener name such as PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or one mapped in listener.security.protocol.map)", it)
		}
		if r := hostPortReason(hp); r != "" || hp == "" {
			if r == "" {
				r = "must look like host:port"
			}
			return fmt.Sprintf("%s: %s", it, r)
		}
		if advertised {
			if _, port, _ := net.SplitHostPort(hp); port == "0" {
				return "advertised port must not be 0"
			}
		}
		if seen[name] {
			return fmt.Sprintf("each listener must have a different name, %s is used twice", name)
		}
		seen[name] = true
	}
	return ""
}

// ProtocolMap is the effective listener.security.protocol.map: the
// setting, plus (when it was not set explicitly) PLAINTEXT for controller
// listener names that are not security protocol names, as Kafka's
// effectiveListenerSecurityProtocolMap does in KRaft mode.
func (b *Broker) ProtocolMap() map[string]string {
	m, _ := parseProtocolMap(b.Get("listener.security.protocol.map"))
	if !b.IsSet("listener.security.protocol.map") {
		for _, n := range b.List("controller.listener.names") {
			n = strings.ToUpper(n)
			if _, ok := m[n]; !ok {
				m[n] = ProtocolPlaintext
			}
		}
	}
	return m
}

func (b *Broker) parseListeners(name string) ([]Listener, error) {
	pm := b.ProtocolMap()
	var out []Listener
	for _, it := range b.List(name) {
		n, hp, _ := strings.Cut(it, "://")
		n = strings.ToUpper(n)
		host, portStr, _ := net.SplitHostPort(hp)
		port, _ := strconv.Atoi(portStr)
		proto, ok := pm[n]
		if !ok {
			return nil, invalidf("invalid configuration: %s: no security protocol defined for listener %s: add it to listener.security.protocol.map (e.g. %s:PLAINTEXT)", name, n, n)
		}
		out = append(out, Listener{Name: n, Host: host, Port: port, Protocol: proto})
	}
	return out, nil
}

// Listeners returns every listener of the listeners setting with its
// protocol (controller listeners included).
func (b *Broker) Listeners() []Listener {
	ls, _ := b.parseListeners("listeners")
	return ls
}

// IsControllerListener reports whether name is in controller.listener.names.
func (b *Broker) IsControllerListener(name string) bool {
	for _, n := range b.List("controller.listener.names") {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// ClientListeners are the listeners that serve Kafka clients (listeners
// minus the controller listeners).
func (b *Broker) ClientListeners() []Listener {
	var out []Listener
	for _, l := range b.Listeners() {
		if !b.IsControllerListener(l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// ControllerListener is the first controller listener among listeners
// (false when there is none: a broker-only node, or zero configuration).
func (b *Broker) ControllerListener() (Listener, bool) {
	for _, n := range b.List("controller.listener.names") {
		for _, l := range b.Listeners() {
			if strings.EqualFold(l.Name, n) {
				return l, true
			}
		}
	}
	return Listener{}, false
}

// AdvertisedListeners is advertised.listeners, defaulting per listener to
// the client listeners (Kafka: listeners minus the controller listeners).
func (b *Broker) AdvertisedListeners() []Listener {
	adv, _ := b.parseListeners("advertised.listeners")
	out := b.ClientListeners()
	for i, l := range out {
		for _, a := range adv {
			if a.Name == l.Name {
				out[i].Host, out[i].Port = a.Host, a.Port
			}
		}
	}
	return out
}

// KRaftConfigured reports whether any KRaft setting was given
// (process.roles, controller.quorum.voters, controller.listener.names).
func (b *Broker) KRaftConfigured() bool {
	return b.IsSet("process.roles") || b.IsSet("controller.quorum.voters") || b.IsSet("controller.listener.names")
}

// Clustered reports whether the node runs with the cluster metadata store:
// KRaft settings were given, or zero configuration was made a one-node
// cluster (WithOneNodeCluster).
func (b *Broker) Clustered() bool { return b.oneNode || b.KRaftConfigured() }

// OneNodeCluster reports whether the KRaft settings are zero
// configuration's implicit ones (WithOneNodeCluster).
func (b *Broker) OneNodeCluster() bool { return b.oneNode }

// oneNodeListener is the controller listener's name under zero
// configuration.
const oneNodeListener = "CONTROLLER"

// WithOneNodeCluster returns the settings of zero configuration as a
// one-node cluster (docs/cluster.md "Zero configuration"): a combined
// node (process.roles broker,controller), its controller listener
// CONTROLLER on ctlAddr (a loopback address bound at start) added to
// listeners, and itself the only voter. The values stay defaults (not
// IsSet): the user set none of them. It is an error to call it when any
// KRaft setting was given.
func (b *Broker) WithOneNodeCluster(ctlAddr string) (*Broker, error) {
	if b.KRaftConfigured() {
		return nil, fmt.Errorf("KRaft settings given: not zero configuration")
	}
	for _, l := range b.Listeners() {
		if l.Name == oneNodeListener {
			return nil, invalidf("invalid configuration: listeners names a listener %s but no KRaft setting is given: with zero configuration Strata adds its own controller listener of that name; rename the listener, or configure the node as a cluster (process.roles, controller.listener.names, controller.quorum.voters)", l.Name)
		}
	}
	nb := b.clone()
	nb.static, nb.dynDefault, nb.dynBroker = b.static, b.dynDefault, b.dynBroker
	nb.oneNode = true
	nb.values["process.roles"] = RoleBroker + "," + RoleController
	nb.values["controller.listener.names"] = oneNodeListener
	nb.values["listeners"] = b.Get("listeners") + "," + oneNodeListener + "://" + ctlAddr
	nb.values["controller.quorum.voters"] = fmt.Sprintf("%d@%s", b.Int("node.id"), ctlAddr)
	if _, err := parseVoters(nb.values["controller.quorum.voters"]); err != nil {
		return nil, fmt.Errorf("zero configuration's controller listener %s: %w", ctlAddr, err)
	}
	return nb, nil
}

// HasRole reports whether process.roles includes role.
func (b *Broker) HasRole(role string) bool { return slices.Contains(b.List("process.roles"), role) }

// Voters returns controller.quorum.voters.
func (b *Broker) Voters() []Voter {
	v, _ := parseVoters(b.Get("controller.quorum.voters"))
	return v
}

// interBrokerName is the name of the listener brokers reach each other on:
// inter.broker.listener.name, else the listener named like
// security.inter.broker.protocol (KafkaConfig.interBrokerListenerName);
// when neither is set and no client listener has that name, a node's only
// client listener (Strata: a one-listener node needs no setting).
func (b *Broker) interBrokerName() string {
	if n := b.Get("inter.broker.listener.name"); n != "" {
		return strings.ToUpper(n)
	}
	name := strings.ToUpper(b.Get("security.inter.broker.protocol"))
	cls := b.ClientListeners()
	for _, l := range cls {
		if l.Name == name {
			return name
		}
	}
	if len(cls) == 1 && !b.IsSet("security.inter.broker.protocol") {
		return cls[0].Name
	}
	return name
}

// InterBrokerListener is the client listener brokers reach each other on
// (false when listeners has none of that name).
func (b *Broker) InterBrokerListener() (Listener, bool) {
	name := b.interBrokerName()
	for _, l := range b.ClientListeners() {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

// validateKRaft checks the cross-setting rules of the KRaft settings, with
// Kafka's messages where Kafka has one (KafkaConfig.validateValues).
func (b *Broker) validateKRaft() error {
	// Listener names first, protocols after the KRaft rules, so a
	// missing controller.listener.names is reported as such.
	names := map[string]bool{}
	for _, it := range b.List("listeners") {
		n, _, _ := strings.Cut(it, "://")
		names[strings.ToUpper(n)] = true
	}
	isBroker, isController := b.HasRole(RoleBroker), b.HasRole(RoleController)
	explicit := b.IsSet("process.roles") || b.IsSet("controller.quorum.voters") || b.IsSet("controller.listener.names")
	cln := b.List("controller.listener.names")
	voters := b.Voters()
	if explicit {
		if len(cln) == 0 {
			return invalidf("invalid configuration: controller.listener.names must not be empty when running in KRaft mode (process.roles=%s)", b.Get("process.roles"))
		}
		if len(voters) == 0 {
			return invalidf("invalid configuration: controller.quorum.voters must list the controllers (id@host:port of each controller listener)")
		}
	}
	if isController && explicit {
		found := false
		for _, n := range cln {
			found = found || names[strings.ToUpper(n)]
		}
		if !found {
			return invalidf("invalid configuration: controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role (listeners=%s, controller.listener.names=%s)",
				b.Get("listeners"), b.Get("controller.listener.names"))
		}
	}
	if _, err := b.parseListeners("listeners"); err != nil {
		return err
	}
	adv, err := b.parseListeners("advertised.listeners")
	if err != nil {
		return err
	}
	for _, a := range adv {
		if !names[a.Name] {
			return invalidf("invalid configuration: advertised.listeners names listener %s, which is not in listeners (%s)", a.Name, b.Get("listeners"))
		}
		if b.IsControllerListener(a.Name) {
			// KIP-853: a controller may advertise its controller listener;
			// with a static voter list that address is its voter entry.
			if !isController {
				return invalidf("invalid configuration: advertised.listeners must not contain the controller listener %s when process.roles (%s) has no controller role: clients reach brokers, not controllers", a.Name, b.Get("process.roles"))
			}
			for _, v := range voters {
				if v.ID == int32(b.Int("node.id")) && (v.Host != a.Host || v.Port != a.Port) {
					return invalidf("invalid configuration: advertised.listeners gives the controller listener %s as %s but controller.quorum.voters names node %d at %s:%d: they must agree (the voter address is where other controllers and brokers reach this one)",
						a.Name, a.Addr(), v.ID, v.Host, v.Port)
				}
			}
		}
	}
	if isController && explicit {
		found := false
		for _, v := range voters {
			found = found || v.ID == int32(b.Int("node.id"))
		}
		if !found {
			return invalidf("invalid configuration: if process.roles contains the 'controller' role, the node id %d must be included in the set of voters controller.quorum.voters=%s",
				b.Int("node.id"), b.Get("controller.quorum.voters"))
		}
	}
	if isController && !isBroker && explicit {
		// Kafka's KafkaConfig.validateValues for process.roles=controller.
		for _, l := range b.Listeners() {
			if !b.IsControllerListener(l.Name) {
				return invalidf("invalid configuration: the listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller (%s is not in %s): a controller-only node serves no Kafka clients",
					l.Name, b.Get("controller.listener.names"))
			}
		}
	}
	if isBroker && !isController {
		for _, l := range b.Listeners() {
			if b.IsControllerListener(l.Name) {
				return invalidf("invalid configuration: controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role (%s)", l.Name)
			}
		}
		for _, v := range voters {
			if v.ID == int32(b.Int("node.id")) {
				return invalidf("invalid configuration: node.id %d is a voter in controller.quorum.voters but process.roles (%s) has no controller role", v.ID, b.Get("process.roles"))
			}
		}
	}
	if b.IsSet("inter.broker.listener.name") && b.IsSet("security.inter.broker.protocol") {
		// KafkaConfig.validateValues (getInterBrokerListenerNameAndSecurityProtocol).
		return invalidf("invalid configuration: only one of inter.broker.listener.name and security.inter.broker.protocol should be set")
	}
	if isBroker {
		cls := b.ClientListeners()
		if len(cls) == 0 {
			return invalidf("invalid configuration: listeners (%s) has no client listener: a broker needs one listener that is not in controller.listener.names", b.Get("listeners"))
		}
		if _, ok := b.InterBrokerListener(); !ok {
			var ns []string
			for _, l := range cls {
				ns = append(ns, l.Name)
			}
			what := "inter.broker.listener.name"
			if !b.IsSet("inter.broker.listener.name") {
				what = "security.inter.broker.protocol"
			}
			// KafkaConfig.validateValues: the inter-broker listener must
			// be one of the broker's (advertised) listeners.
			return invalidf("invalid configuration: inter.broker.listener.name must be a listener name defined in listeners: %s gives %s, and the client listeners are %s (set inter.broker.listener.name to one of them)",
				what, b.interBrokerName(), strings.Join(ns, ", "))
		}
	}
	for _, n := range []string{"inter.broker.listener.name", "security.inter.broker.protocol"} {
		if !isBroker && b.IsSet(n) {
			return invalidf("invalid configuration: %s is set but process.roles (%s) has no broker role, so it would not be used", n, b.Get("process.roles"))
		}
	}
	if err := b.checkListenerSettings(); err != nil {
		return err
	}
	// The broker fences itself two thirds of the session after its last
	// renewal (docs/cluster.md): renewals must come more often.
	if hb, st := b.Int64("broker.heartbeat.interval.ms"), b.Int64("broker.session.timeout.ms"); hb*3 >= st*2 {
		return invalidf("invalid configuration: broker.heartbeat.interval.ms (%d) must be less than two thirds of broker.session.timeout.ms (%d): a broker that has not renewed its session for two thirds of it stops leading", hb, st)
	}
	if cl, ok := b.ControllerListener(); ok && cl.Protocol != ProtocolPlaintext {
		return invalidf("invalid configuration: controller listener %s uses %s: this release serves controller listeners over PLAINTEXT only", cl.Name, cl.Protocol)
	}
	if explicit && len(cln) > 0 {
		// Brokers reach the controllers with the protocol of the first
		// controller listener name (Kafka's
		// KafkaConfig.controllerListenerNames.head): on a broker-only node
		// it is not in listeners, but it is still what would be used.
		first := strings.ToUpper(cln[0])
		if p, ok := b.ProtocolMap()[first]; ok && p != ProtocolPlaintext {
			return invalidf("invalid configuration: listener.security.protocol.map maps the controller listener %s to %s: this release reaches controllers over PLAINTEXT only", first, p)
		}
	}
	if isController && explicit {
		var bound []string
		for _, l := range b.Listeners() {
			if b.IsControllerListener(l.Name) {
				bound = append(bound, l.Name)
			}
		}
		if len(bound) > 1 {
			return invalidf("invalid configuration: listeners has %d controller listeners (%s): this release serves one controller listener per node, the address of its controller.quorum.voters entry; keep one", len(bound), strings.Join(bound, ", "))
		}
	}
	return nil
}
