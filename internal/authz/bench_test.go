package authz

import (
	"fmt"
	"net"
	"testing"
)

// manyACLs is 10,000 ACLs: half literal topic names, half prefixes of
// varying length, for 100 principals, plus group ACLs.
func manyACLs(n int) []ACL {
	acls := make([]ACL, 0, n)
	for i := 0; len(acls) < n; i++ {
		user := fmt.Sprintf("User:team%d", i%100)
		acls = append(acls,
			ACL{ResourceTopic, fmt.Sprintf("orders.%d.events", i), PatternLiteral, user, "*", OpWrite, PermAllow},
			ACL{ResourceTopic, fmt.Sprintf("team%d.app%d.", i%100, i), PatternPrefixed, user, "*", OpRead, PermAllow},
			ACL{ResourceGroup, fmt.Sprintf("team%d-", i%100), PatternPrefixed, user, "*", OpRead, PermAllow},
		)
	}
	return acls[:n]
}

// BenchmarkAuthorize measures one decision against 10,000 ACLs (the cost
// a produce or fetch pays per topic with the authorizer on).
func BenchmarkAuthorize(b *testing.B) {
	a := New(Config{})
	a.SetACLs(manyACLs(10000))
	s := NewSubject(User("team7"), net.ParseIP("127.0.0.1"))
	b.Run("literal", func(b *testing.B) {
		for b.Loop() {
			if !a.Authorize(s, OpWrite, ResourceTopic, "orders.7.events") {
				b.Fatal("denied")
			}
		}
	})
	b.Run("prefixed", func(b *testing.B) {
		for b.Loop() {
			if !a.Authorize(s, OpRead, ResourceTopic, "team7.app7.clicks") {
				b.Fatal("denied")
			}
		}
	})
	b.Run("denied", func(b *testing.B) {
		for b.Loop() {
			if a.Authorize(s, OpRead, ResourceTopic, "nobody.reads.this") {
				b.Fatal("allowed")
			}
		}
	})
}

// BenchmarkSetACLs measures rebuilding the index of 10,000 ACLs (paid
// once per ACL change, on every broker).
func BenchmarkSetACLs(b *testing.B) {
	acls := manyACLs(10000)
	a := New(Config{})
	for b.Loop() {
		a.SetACLs(acls)
	}
}
