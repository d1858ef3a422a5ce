package broker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/sasl"
	"github.com/strata-io/strata/internal/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestScramStore checks the credential file: written 0600, reloaded with
// the same keys, and Kafka's per-user errors leaving the store unchanged.
func TestScramStore(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.LoadBroker("", nil, map[string]string{"log.dirs": dir})
	if err != nil {
		t.Fatal(err)
	}
	salt := []byte("salt")
	sp, _ := sasl.SaltPassword(sasl.ScramSHA256, "pw", salt, 4096)
	res, err := AlterScramOffline(cfg, nil, []ScramUpsertion{{User: "u", Mechanism: sasl.ScramSHA256, Iterations: 4096, Salt: salt, SaltedPassword: sp}})
	if err != nil || res["u"] != nil {
		t.Fatal(err, res)
	}
	fi, err := os.Stat(filepath.Join(dir, scramFileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential file: %v %v", fi, err)
	}
	res, err = AlterScramOffline(cfg, []ScramDeletion{{User: "u", Mechanism: sasl.ScramSHA512}},
		[]ScramUpsertion{{User: "u", Mechanism: sasl.ScramSHA256, Iterations: 4096, Salt: salt, SaltedPassword: []byte("other")}})
	if err != nil || !errors.Is(res["u"], kerr.ResourceNotFound) {
		t.Fatalf("delete of a missing mechanism: %v %v", err, res)
	}
	st, err := loadScram(vfs.Default(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sasl.NewScramCredential(sasl.ScramSHA256, sp, salt, 4096)
	got := st.users["u"][sasl.ScramSHA256]
	if string(got.StoredKey) != string(want.StoredKey) || string(got.ServerKey) != string(want.ServerKey) || got.Iterations != 4096 || len(st.users["u"]) != 1 {
		t.Errorf("reloaded %+v, want keys of %+v (the failed request must change nothing)", got, want)
	}
}
