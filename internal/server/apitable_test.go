package server_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// TestCompatibilityTableMatchesApiVersions: the API table of
// docs/compatibility.md (key, name, version range) says exactly what a
// broker advertises in ApiVersions, so the one written list of what Strata
// serves cannot drift from the code. Keys served only on some nodes are
// checked where they are served: SaslHandshake and SaslAuthenticate on a
// SASL listener; the client quota APIs (48, 49) and UnregisterBroker (64)
// need the cluster metadata and are checked absent from a single node.
func TestCompatibilityTableMatchesApiVersions(t *testing.T) {
	doc := compatibilityTable(t)
	plain := advertisedVersions(t, startBroker(t, "", nil))
	sasl := advertisedVersions(t, startBroker(t, "", saslOverrides()))
	onlySASL := map[int16]bool{17: true, 36: true}
	onlyCluster := map[int16]bool{48: true, 49: true, 64: true}
	for key, vr := range plain {
		if _, ok := doc[key]; !ok {
			t.Errorf("ApiVersions advertises %s (%d) %d-%d: not in docs/compatibility.md", kmsg.NameForKey(key), key, vr[0], vr[1])
		}
	}
	for key, row := range doc {
		got, ok := plain[key]
		switch {
		case onlySASL[key]:
			got, ok = sasl[key]
		case onlyCluster[key]:
			if ok {
				t.Errorf("%s (%d) is advertised by a single node; the table says cluster nodes only", row.name, key)
			}
			continue
		}
		if !ok {
			t.Errorf("docs/compatibility.md lists %s (%d) %d-%d: not advertised", row.name, key, row.vr[0], row.vr[1])
			continue
		}
		if got != row.vr {
			t.Errorf("%s (%d): docs/compatibility.md says %d-%d, ApiVersions %d-%d", row.name, key, row.vr[0], row.vr[1], got[0], got[1])
		}
		// The table uses Kafka's names; franz-go spells some acronyms in
		// capitals and calls key 45 AlterPartitionAssignments.
		if want := kmsg.NameForKey(key); !strings.EqualFold(want, row.name) && !(key == 45 && row.name == "AlterPartitionReassignments") {
			t.Errorf("key %d is %s, docs/compatibility.md names it %s", key, want, row.name)
		}
	}
}

type apiRow struct {
	name string
	vr   [2]int16
}

// compatibilityTable parses the "| Key | API | Versions | ..." table.
func compatibilityTable(t *testing.T) map[int16]apiRow {
	t.Helper()
	data, err := os.ReadFile("../../docs/compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int16]apiRow{}
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "| Key | API | Versions |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break // the table's end
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			t.Fatalf("compatibility.md: short row %q", line)
		}
		key, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			t.Fatalf("compatibility.md: key in %q: %v", line, err)
		}
		lo, hi, found := strings.Cut(strings.TrimSpace(cells[3]), "–")
		if !found {
			hi = lo
		}
		min, err1 := strconv.Atoi(lo)
		max, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("compatibility.md: versions in %q", line)
		}
		if _, dup := rows[int16(key)]; dup {
			t.Fatalf("compatibility.md: key %d listed twice", key)
		}
		rows[int16(key)] = apiRow{strings.TrimSpace(cells[2]), [2]int16{int16(min), int16(max)}}
	}
	if len(rows) == 0 {
		t.Fatal("compatibility.md: no API table found")
	}
	return rows
}

// advertisedVersions is the broker's ApiVersions answer by key.
func advertisedVersions(t *testing.T, tb *servertest.Broker) map[int16][2]int16 {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctxT(t), tb.Client())
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: error %d", resp.ErrorCode)
	}
	out := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out
}
