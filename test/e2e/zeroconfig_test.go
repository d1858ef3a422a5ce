package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Zero-config defaults of `strata serve`.
const (
	defaultKafka   = "127.0.0.1:9092"
	defaultMetrics = "127.0.0.1:9644"
	defaultDataDir = "strata-data"
	cleanMarker    = ".kafka_cleanshutdown" // internal/broker cleanShutdownName
)

// requireFreePort fails the test when addr cannot be bound.
func requireFreePort(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("zero-config test needs %s free (the default listener), but it is busy on this machine: %v", addr, err)
	}
	ln.Close()
}

var (
	// recoverySkipped matches a log line saying recovery was skipped
	// because the clean-shutdown marker was found.
	recoverySkipped = regexp.MustCompile(`(?i)(skip\w*[^"]*recover|recover[^"]*skip|clean[_ -]?shutdown[^"]*(found|true))`)
	// recoveryRan matches a log line saying logs are (being) recovered.
	recoveryRan = regexp.MustCompile(`(?i)(recovering|recovered|running recovery|recovery (ran|started|complete|done|of)|no clean[_ -]?shutdown|clean[_ -]?shutdown[^"]*(false|missing|absent|not found))`)
)

// grepLines returns the lines matching re.
func grepLines(lines []string, re *regexp.Regexp) []string {
	var out []string
	for _, l := range lines {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// checkKcatData consumes topic t with kcat and compares it with want.
func checkKcatData(t *testing.T, ctx context.Context, kcat, want string) {
	t.Helper()
	got := runKcat(t, ctx, kcat, "", "-b", defaultKafka, "-C", "-t", "t", "-e", "-q", "-f", `%p %o %k:%s\n`)
	if got != want {
		t.Errorf("kcat consume of t:\n got %q\nwant %q", got, want)
	}
}

// TestZeroConfig runs `strata serve` with no arguments in an empty dir,
// drives it with kcat and HTTP, and checks clean and unclean restarts.
func TestZeroConfig(t *testing.T) {
	kcat := needKcat(t)
	requireFreePort(t, defaultKafka)
	requireFreePort(t, defaultMetrics)
	ctx := ctxFor(t, 2*time.Minute)
	cwd := t.TempDir()
	data := filepath.Join(cwd, defaultDataDir)

	// 1. First start: zero config.
	p := startProc(t, cwd, "serve")
	if p.Kafka != defaultKafka {
		t.Errorf("listening line kafka=%q, want %q: %s", p.Kafka, defaultKafka, p.Line)
	}
	if p.Metrics != "http://"+defaultMetrics {
		t.Errorf("listening line metrics=%q, want http://%s/metrics: %s", p.Metrics, defaultMetrics, p.Line)
	}
	if !strings.Contains(p.LogDirs, defaultDataDir) {
		t.Errorf("listening line log.dirs=%q does not say where the data is (want ./%s): %s", p.LogDirs, defaultDataDir, p.Line)
	}
	if st, err := os.Stat(data); err != nil || !st.IsDir() {
		t.Fatalf("zero-config data dir %s: %v", data, err)
	}

	runKcat(t, ctx, kcat, "k1:v1\nk2:v2\nk3:v3\n", "-b", defaultKafka, "-P", "-t", "t", "-K:")
	want := "0 0 k1:v1\n0 1 k2:v2\n0 2 k3:v3\n"
	checkKcatData(t, ctx, kcat, want)

	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, body, err := httpGet(ctx, p.Metrics+path)
		if err != nil || code != 200 {
			t.Errorf("GET %s: %d %v\n%s", path, code, err, body)
			continue
		}
		if path == "/metrics" && !strings.Contains(body, `strata_partition_log_end_offset{`) {
			t.Errorf("/metrics lacks strata_partition_log_end_offset:\n%.2000s", body)
		}
		if path == "/metrics" && !regexp.MustCompile(`strata_partition_high_watermark\{[^}]*topic="t"[^}]*\} 3\b`).MatchString(body) {
			t.Errorf("/metrics: no high watermark 3 for topic t:\n%s", grepMetric(body, "strata_partition_high_watermark"))
		}
	}

	// 2. SIGTERM: exit 0, marker and meta.properties on disk.
	if code := p.Term(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0:\n%s", code, p.Log())
	}
	if _, err := os.Stat(filepath.Join(data, cleanMarker)); err != nil {
		t.Errorf("clean shutdown marker after SIGTERM: %v", err)
	}
	meta, err := os.ReadFile(filepath.Join(data, "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	clusterID := regexp.MustCompile(`(?m)^cluster\.id=(\S+)$`).FindSubmatch(meta)
	if clusterID == nil {
		t.Fatalf("meta.properties has no cluster.id:\n%s", meta)
	}

	// 3. Clean restart: recovery skipped, marker consumed, data kept.
	p = startProc(t, cwd, "serve")
	if _, err := os.Stat(filepath.Join(data, cleanMarker)); !os.IsNotExist(err) {
		t.Errorf("clean shutdown marker still present while the broker runs (must be consumed at start): %v", err)
	}
	checkKcatData(t, ctx, kcat, want)
	cleanLines := p.Lines()
	t.Run("log says recovery skipped", func(t *testing.T) {
		if ran := grepLines(cleanLines, recoveryRan); len(ran) > 0 {
			t.Errorf("clean restart logged recovery:\n%s", strings.Join(ran, "\n"))
		}
		if len(grepLines(cleanLines, recoverySkipped)) == 0 {
			t.Errorf("clean restart logged no line saying recovery was skipped (clean shutdown marker found); log was:\n%s", strings.Join(cleanLines, "\n"))
		}
	})
	runKcat(t, ctx, kcat, "k4:v4\n", "-b", defaultKafka, "-P", "-t", "t", "-K:")
	want += "0 3 k4:v4\n"

	// 4. SIGKILL, restart: recovery ran, data intact.
	p.Kill()
	if _, err := os.Stat(filepath.Join(data, cleanMarker)); !os.IsNotExist(err) {
		t.Errorf("clean shutdown marker present after SIGKILL: %v", err)
	}
	p = startProc(t, cwd, "serve")
	checkKcatData(t, ctx, kcat, want)
	crashLines := p.Lines()
	t.Run("log says recovery ran", func(t *testing.T) {
		if skipped := grepLines(crashLines, recoverySkipped); len(skipped) > 0 {
			t.Errorf("restart after SIGKILL logged recovery as skipped:\n%s", strings.Join(skipped, "\n"))
		}
		if len(grepLines(crashLines, recoveryRan)) == 0 {
			t.Errorf("restart after SIGKILL logged no line saying recovery ran (no clean shutdown marker); log was:\n%s", strings.Join(crashLines, "\n"))
		}
	})
	meta2, err := os.ReadFile(filepath.Join(data, "meta.properties"))
	if err != nil || !strings.Contains(string(meta2), "cluster.id="+string(clusterID[1])+"\n") {
		t.Errorf("cluster.id changed across restarts: before %s, now:\n%s (%v)", clusterID[1], meta2, err)
	}
	if code := p.Term(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

// grepMetric returns the lines of a Prometheus text body for one metric.
func grepMetric(body, name string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
