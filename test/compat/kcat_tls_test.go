package compat

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/tlstest"
)

// TestKcatTLS runs kcat (librdkafka, OpenSSL) against an SSL listener:
// server authentication only, then mutual TLS with ssl.client.auth=required.
// kcat produces and consumes; the topic is created over TLS with franz-go.
func TestKcatTLS(t *testing.T) {
	if targetKfake() {
		t.Skip("kfake has no SSL listener")
	}
	path := requireTool(t, "kcat", "-V")
	p, err := tlstest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		extra map[string]string
		args  []string
	}{
		{"server-auth", map[string]string{}, nil},
		{"mutual", map[string]string{"ssl.client.auth": "required", "ssl.truststore.location": p.CAFile},
			[]string{"-X", "ssl.certificate.location=" + p.ClientCertFile, "-X", "ssl.key.location=" + p.ClientKeyFile}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			extra := map[string]string{"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": p.ServerKeystore}
			for k, v := range c.extra {
				extra[k] = v
			}
			b := startBroker(t, brokerOpts{extra: extra})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DialTLSConfig(p.ClientConfig(c.extra["ssl.client.auth"] != "")))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "tls"); err != nil {
				t.Fatalf("create topic over TLS: %v", err)
			}
			ssl := append([]string{"-b", b.Addr(), "-t", "tls", "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + p.CAFile}, c.args...)
			var in strings.Builder
			var want []string
			for i := range 50 {
				fmt.Fprintf(&in, "k%d:v%d\n", i, i)
				want = append(want, fmt.Sprintf("k%d=v%d", i, i))
			}
			args := append([]string{"-P", "-K:", "-X", "acks=all"}, ssl...)
			if _, stderr, err := kcatRun(ctx, path, []byte(in.String()), args...); err != nil || strings.Contains(stderr, "Delivery failed") {
				t.Fatalf("kcat %s: %v: %s", strings.Join(args, " "), err, stderr)
			}
			args = append([]string{"-C", "-o", "beginning", "-e", "-f", `%k=%s\n`}, ssl...)
			stdout, stderr, err := kcatRun(ctx, path, nil, args...)
			if err != nil {
				t.Fatalf("kcat %s: %v: %s", strings.Join(args, " "), err, stderr)
			}
			got := strings.Fields(stdout)
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("kcat consumed %d records over TLS, want %d:\n%s\nstderr: %s", len(got), len(want), stdout, stderr)
			}
		})
	}
}
