package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/servertest"
)

// startAuthzBroker runs an in-process combined KRaft node (ACLs and quotas
// live in its metadata store) with a SASL_PLAINTEXT listener, the
// authorizer on and User:admin a super user.
func startAuthzBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return servertest.Start(t, servertest.Options{Settings: map[string]string{
		"node.id":                   "1",
		"process.roles":             "broker,controller",
		"listeners":                 fmt.Sprintf("SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", port),
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  fmt.Sprintf("1@127.0.0.1:%d", port),
		"sasl.enabled.mechanisms":   "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="alice-secret";`,
		"authorizer.class.name":                               "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                         "User:admin",
	}}).Addr()
}

// TestACLAndQuotaCommands drives `strata acl` and `strata quota` against a
// broker with the authorizer on: ACLs created in kafka-acls' terms take
// effect (alice may produce once granted), are listed and deleted; quotas
// are set, described and deleted; mistakes are refused with a message.
func TestACLAndQuotaCommands(t *testing.T) {
	bin := buildStrata(t)
	b := "--brokers=" + startAuthzBroker(t)
	admin := []string{b, "--sasl-mechanism", "PLAIN", "--sasl-user", "admin", "--sasl-password", "admin-secret"}
	alice := []string{b, "--sasl-mechanism", "PLAIN", "--sasl-user", "alice", "--sasl-password", "alice-secret"}
	with := func(auth []string, args ...string) []string { return append(args, auth...) }

	ok(t, bin, "", with(admin, "topic", "create", "orders", "--partitions", "1")...)
	if r := run(t, bin, "k:v\n", with(alice, "produce", "orders", "-K:", "--timeout", "3s")...); r.code == 0 || !strings.Contains(r.stderr, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice produced without an ACL: exit %d, %s", r.code, r.stderr)
	}
	out := ok(t, bin, "", with(admin, "acl", "create", "--allow-principal", "User:alice", "--producer", "--idempotent", "--topic", "orders")...)
	if !strings.Contains(out, "created 4 ACL(s)") || !strings.Contains(out, "IDEMPOTENT_WRITE") {
		t.Errorf("acl create --producer:\n%s", out)
	}
	ok(t, bin, "k:v\n", with(alice, "produce", "orders", "-K:")...)

	ok(t, bin, "", with(admin, "acl", "create", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "etl-", "--resource-pattern-type", "prefixed")...)
	out = ok(t, bin, "", with(admin, "acl", "list", "--principal", "User:alice")...)
	for _, want := range []string{"TOPIC  etl-  PREFIXED  User:alice  *  READ  ALLOW", "CLUSTER  kafka-cluster  LITERAL  User:alice  *  IDEMPOTENT_WRITE  ALLOW"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("acl list lacks %q:\n%s", want, out)
		}
	}
	// docs/security.md's command: PREFIXED topic ACLs, and the cluster's
	// IDEMPOTENT_WRITE LITERAL as Kafka's kafka-acls gives it.
	ok(t, bin, "", with(admin, "acl", "create", "--allow-principal", "User:etl", "--producer", "--idempotent", "--topic", "etl-", "--resource-pattern-type", "prefixed")...)
	out = ok(t, bin, "", with(admin, "acl", "list", "--principal", "User:etl")...)
	for _, want := range []string{"TOPIC  etl-  PREFIXED  User:etl  *  WRITE  ALLOW", "CLUSTER  kafka-cluster  LITERAL  User:etl  *  IDEMPOTENT_WRITE  ALLOW"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("acl list lacks %q:\n%s", want, out)
		}
	}
	fails(t, bin, "strata: --cluster with --resource-pattern-type PREFIXED: the cluster resource (kafka-cluster) takes LITERAL ACLs only; give the cluster ACL in a command of its own\n",
		with(admin, "acl", "create", "--allow-principal", "User:x", "--operation", "Alter", "--cluster", "--resource-pattern-type", "prefixed")...)
	out = ok(t, bin, "", with(admin, "acl", "list", "--topic", "orders", "-o", "json")...)
	if strings.Count(out, `"resource_type": "TOPIC"`) != 3 {
		t.Errorf("acl list --topic orders -o json:\n%s", out)
	}
	out = ok(t, bin, "", with(admin, "acl", "delete", "--topic", "orders", "--operation", "Write")...)
	if !strings.Contains(out, "deleted 1 ACL(s)") {
		t.Errorf("acl delete:\n%s", out)
	}
	if r := run(t, bin, "k:v\n", with(alice, "produce", "orders", "-K:", "--timeout", "3s")...); r.code == 0 {
		t.Error("alice still produces after her WRITE ACL was deleted")
	}
	// alice is no cluster admin: she may not manage ACLs.
	if r := run(t, bin, "", with(alice, "acl", "list")...); r.code == 0 || !strings.Contains(r.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Errorf("alice lists ACLs: exit %d %s", r.code, r.stderr)
	}
	fails(t, bin, "strata: name a resource: --topic, --group, --transactional-id or --cluster\n",
		with(admin, "acl", "create", "--allow-principal", "User:x", "--operation", "Read")...)
	fails(t, bin, "strata: --allow-principal \"alice\": expected a string in format principalType:principalName but got alice\n",
		with(admin, "acl", "create", "--allow-principal", "alice", "--operation", "Read", "--topic", "t")...)

	ok(t, bin, "", with(admin, "quota", "set", "--user", "alice", "--producer-byte-rate", "1048576", "--add-config", "request_percentage=25")...)
	ok(t, bin, "", with(admin, "quota", "set", "--user-default", "--consumer-byte-rate", "2097152")...)
	out = ok(t, bin, "", with(admin, "quota", "describe")...)
	for _, want := range []string{"user=alice  producer_byte_rate  1048576", "user=alice  request_percentage  25", "user=<default>  consumer_byte_rate  2097152"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "  "), want) {
			t.Errorf("quota describe lacks %q:\n%s", want, out)
		}
	}
	fails(t, bin, "strata: set quotas of user=alice: Invalid configuration key producer_byte_rat (INVALID_REQUEST)\n",
		with(admin, "quota", "set", "--user", "alice", "--add-config", "producer_byte_rat=5")...)
	fails(t, bin, "strata: --delete-config request_percent: not a quota key (consumer_byte_rate, controller_mutation_rate, producer_byte_rate, request_percentage): did you mean request_percentage?\n",
		with(admin, "quota", "delete", "--user", "alice", "--delete-config", "request_percent")...)
	ok(t, bin, "", with(admin, "quota", "delete", "--user", "alice", "--delete-config", "request_percentage")...)
	out = ok(t, bin, "", with(admin, "quota", "describe", "--user", "alice", "-o", "json")...)
	if !strings.Contains(out, `"producer_byte_rate": 1048576`) || strings.Contains(out, "request_percentage") {
		t.Errorf("after delete-config:\n%s", out)
	}
	if r := run(t, bin, "", with(admin, "quota", "set", "--user", "alice", "--producer-byte-rate", "1.5")...); r.code == 0 || !strings.Contains(r.stderr, "producer_byte_rate cannot be a fractional value") {
		t.Errorf("fractional byte rate: exit %d %s", r.code, r.stderr)
	}
}

// TestACLWithoutAuthorizer: against a broker without authorizer.class.name
// the ACL commands fail with Kafka's SECURITY_DISABLED and the broker's
// message first, not kerr's generic description of the code.
func TestACLWithoutAuthorizer(t *testing.T) {
	bin := buildStrata(t)
	b := "--brokers=" + startStrata(t, nil)
	fails(t, bin, "strata: list ACLs: No Authorizer is configured on the broker (SECURITY_DISABLED)\n", "acl", "list", b)
}
