package suggest

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"create", "list", "describe", "alter", "delete", "add-partitions", "trim"}
	for _, c := range []struct{ word, want string }{
		{"lst", "list"},
		{"creat", "create"},
		{"crate", "create"},
		{"lsit", "list"},                 // adjacent swap
		{"LIST", "list"},                 // case
		{"partitions", "add-partitions"}, // a part of a name
		{"xyz", ""},
		{"d", ""},
		{"describ", "describe"},
	} {
		if got := Closest(c.word, names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
	settings := []string{"log.retention.hours", "log.retention.ms", "log.dirs", "num.partitions", "strata.durable.acks"}
	for _, c := range []struct{ word, want string }{
		{"log.retention.hour", "log.retention.hours"},
		{"log.dir.s", "log.dirs"},
		{"num.partition", "num.partitions"},
		{"dirs", "log.dirs"},
		{"durable.acks", "strata.durable.acks"},
		{"process.roles", ""},
	} {
		if got := Closest(c.word, settings); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"abc", "abc", 0}, {"abc", "acb", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}} {
		if got := distance(c.a, c.b); got != c.d {
			t.Errorf("distance(%q,%q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
