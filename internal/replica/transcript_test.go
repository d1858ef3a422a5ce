package replica

import (
	"testing"

	"github.com/strata-io/strata/internal/transcript"
)

// TestTranscripts runs every testdata/*.txt against the simulated cluster
// of sim_test.go: blocks of
//
//	command args...
//	----
//	expected output
//
// separated by blank lines, '#' lines being comments (etcd raft's
// interaction-test style, internal/transcript). Run with -rewrite to
// regenerate the expected output, then read the diff: the transcripts are
// the specification.
func TestTranscripts(t *testing.T) {
	transcript.Run(t, "testdata/*.txt", func(t *testing.T) func(transcript.Command) string {
		c := newCluster()
		return func(cmd transcript.Command) string { return c.run(t, cmd.Line) }
	})
}
