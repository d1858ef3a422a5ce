package protocol

import (
	"regexp"
	"testing"
)

// kafkaSoftwareName is Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN
// (KIP-511), the rule validSoftwareName implements without a regexp.
var kafkaSoftwareName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// FuzzSoftwareName: validSoftwareName accepts exactly what Kafka's pattern
// accepts, for any bytes.
func FuzzSoftwareName(f *testing.F) {
	for _, s := range []string{"kgo", "apache-kafka-java", "3.9.0", "a", "", "-a", "a-", "a.b", "k\u00e9o", "kgo\x00", "a b", "2.3.0-rdkafka-2.3.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validSoftwareName(s), kafkaSoftwareName.MatchString(s); got != want {
			t.Fatalf("validSoftwareName(%q) = %v, Kafka's pattern says %v", s, got, want)
		}
	})
}
