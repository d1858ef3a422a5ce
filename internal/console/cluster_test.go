package console_test

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/servertest"
)

// brokerRowRe is a row of the overview's broker table: node, rack, epoch,
// state, leaders (an offline broker has no address).
var brokerRowRe = regexp.MustCompile(`<tr><td>(\d+)(?: <span class="badge">this broker</span>)?</td><td>(?:<code>[^<]*</code>|<span class="muted">—</span>)</td><td>(<span class="muted">none</span>|[^<]*)</td><td>(-?\d+|—)</td><td(?: class="bad")?>([^<]*)</td><td class="num">(\d+)</td>`)

var offlineRe = regexp.MustCompile(`<dt>Offline</dt><dd(?: class="bad")?>(\d+)</dd>`)

// TestOverviewCluster: on a three-node cluster (three combined nodes,
// docs/cluster.md) node 1's overview lists every broker with its rack, its
// registration epoch from the cluster metadata, "registered" and the
// partitions it leads, and the active controller; once node 3 stops, the
// partitions only it held show as offline and node 3 as an offline broker.
func TestOverviewCluster(t *testing.T) {
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Metrics: true,
		Configure: func(i int, cfg *config.Broker) error { return cfg.Set("broker.rack", fmt.Sprintf("rack-%c", 'a'+i)) }})
	adm := c.Brokers[0].Admin()
	mustCreate(t, adm, "spread", 6, nil)
	_, port, err := net.SplitHostPort(c.Brokers[0].MetricsAddr())
	if err != nil {
		t.Fatal(err)
	}
	w := newWeb(t, "http://127.0.0.1:"+port)

	// The brokers apply the metadata asynchronously: poll for the page
	// to show all three (no timing is asserted).
	var body string
	var rows [][]string
	for deadline := time.Now().Add(60 * time.Second); ; {
		body = w.mustGet("/")
		rows = brokerRowRe.FindAllStringSubmatch(body, -1)
		led := 0
		for _, r := range rows {
			var n int
			fmt.Sscan(r[5], &n)
			led += n
		}
		if (len(rows) == 3 && led >= 6 && strings.Contains(body, "active ")) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(rows) != 3 {
		t.Fatalf("broker rows %q\n%s", rows, body)
	}
	for i, r := range rows {
		if r[1] != fmt.Sprint(i+1) || r[2] != fmt.Sprintf("rack-%c", 'a'+i) || r[3] == "-1" || r[3] == "0" || r[4] != "registered" || r[5] == "0" {
			t.Errorf("broker row %d: %q", i+1, r[1:])
		}
	}
	if !strings.Contains(body, "voters 1, 2, 3") {
		t.Errorf("no quorum of three voters on the overview:\n%s", body)
	}

	c.Brokers[2].Close()
	for deadline := time.Now().Add(60 * time.Second); ; {
		body = w.mustGet("/")
		if m := offlineRe.FindStringSubmatch(body); (m != nil && m[1] != "0") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if m := offlineRe.FindStringSubmatch(body); m == nil || m[1] == "0" {
		t.Errorf("no offline partitions after node 3 stopped:\n%s", body)
	}
	if rows := brokerRowRe.FindAllStringSubmatch(body, -1); len(rows) != 3 || rows[2][1] != "3" || !strings.HasPrefix(rows[2][4], "offline") {
		t.Errorf("broker rows after node 3 stopped: %q", rows)
	}
}
