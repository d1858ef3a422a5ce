package config

import (
	"strings"

	"github.com/strata-io/strata/internal/authz"
)

// securityTable lists the authorization and quota settings (Kafka's
// names and defaults: StandardAuthorizer, BrokerSecurityConfigs, QuotaConfig).
var securityTable = []Setting{
	def("authorizer.class.name", TypeString, "", custom("empty, "+strings.Join(authz.AuthorizerClassNames, " or "), func(v string) string {
		if _, err := authz.Enabled(v); err != nil {
			return err.Error()
		}
		return ""
	}), "Kafka's StandardAuthorizer (either class name) switches ACLs on; empty allows everything. Needs the KRaft settings (docs/security.md)."),
	def("super.users", TypeString, "", custom("principals separated by semicolons, e.g. User:admin;User:ops", func(v string) string {
		if _, err := authz.ParseSuperUsers(v); err != nil {
			return err.Error()
		}
		return ""
	}), "Principals allowed every operation whatever the ACLs say, separated by semicolons (User:admin;User:ops)."),
	def("allow.everyone.if.no.acl.found", TypeBoolean, "false", anyValue,
		"With an authorizer: allow an operation on a resource that no ACL names (false: deny it)."),
	def("ssl.principal.mapping.rules", TypeString, authz.DefaultMappingRules, custom("DEFAULT and RULE:pattern/replacement/[LU] rules separated by commas", func(v string) string {
		if _, err := authz.ParseMappingRules(v); err != nil {
			return err.Error()
		}
		return ""
	}), "Maps the distinguished name of an SSL client certificate to the user name of its principal (Kafka's rule syntax; patterns are RE2 regular expressions); DEFAULT keeps the whole name."),
	def("quota.window.num", TypeInt, "11", atLeast(1),
		"Number of samples kept for produce, fetch and request quotas."),
	def("quota.window.size.seconds", TypeInt, "1", atLeast(1),
		"Length of each sample of the produce, fetch and request quotas, in seconds; also the request quota's longest throttle."),
	def("controller.quota.window.num", TypeInt, "11", atLeast(1),
		"Number of samples of the controller mutation quota (its token bucket holds num x size x rate)."),
	def("controller.quota.window.size.seconds", TypeInt, "1", atLeast(1),
		"Length of each sample of the controller mutation quota, in seconds."),
}
