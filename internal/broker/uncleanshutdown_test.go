package broker

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUncleanShutdownReported: a broker that restarts without its clean
// shutdown marker over logs it acknowledged without fsyncing
// (strata.durable.acks=false) reports an unclean shutdown, which it
// registers with (KIP-966: the controller keeps it out of the eligible
// leader replicas); a fresh directory, a clean restart, and any restart
// with fsynced acks do not.
func TestUncleanShutdownReported(t *testing.T) {
	for _, durable := range []string{"true", "false"} {
		t.Run("durable.acks="+durable, func(t *testing.T) {
			dir := t.TempDir()
			b := openTest(t, dir, "strata.durable.acks", durable)
			if b.UncleanShutdown() {
				t.Fatalf("fresh directory reported an unclean shutdown")
			}
			if _, err := b.CreateTopic(CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openTest(t, dir, "strata.durable.acks", durable)
			if b.UncleanShutdown() {
				t.Fatalf("clean restart reported an unclean shutdown")
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(dir, cleanShutdownName)); err != nil {
				t.Fatal(err)
			}
			b = openTest(t, dir, "strata.durable.acks", durable)
			defer b.Close()
			if got, want := b.UncleanShutdown(), durable == "false"; got != want {
				t.Fatalf("restart without the marker: UncleanShutdown() = %v, want %v", got, want)
			}
		})
	}
}
