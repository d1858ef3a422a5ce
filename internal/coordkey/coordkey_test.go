package coordkey

import "testing"

// The expected values were printed by Java 17:
// h = s.hashCode(); (h == Integer.MIN_VALUE ? 0 : Math.abs(h)) % 50.
func TestPartitionMatchesJava(t *testing.T) {
	for _, c := range []struct {
		key  string
		want int32
	}{
		{"", 0},
		{"a", 47},
		{"Aa", 12},
		{"BB", 12},                // same hashCode as "Aa" (2112)
		{"polygenelubricants", 0}, // hashCode is Integer.MIN_VALUE
		{"hello world!", 3},       // negative hashCode (-217287203)
		{"\U0001F600", 49},        // a surrogate pair: two UTF-16 units
		{"my-group", 12},          // -1906497762
		{"crash-txn", 10},         // 1845915460
	} {
		if got := Partition(c.key, 50); got != c.want {
			t.Errorf("Partition(%q, 50) = %d, want %d", c.key, got, c.want)
		}
	}
}
