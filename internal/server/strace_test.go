package server_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStraceShowsSendfile runs a broker in a child process under
// strace -f -e trace=sendfile (when strace is installed and ptrace is
// allowed), fetches from it with kgo, and checks the kernel saw sendfile
// calls that moved the record bytes.
func TestStraceShowsSendfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatalf("strace not installed (%v): scripts/test.sh installs Debian's strace", err)
	}
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	out := filepath.Join(dir, "strace.out")
	cmd := exec.Command(strace, "-f", "-qq", "-e", "trace=sendfile", "-o", out,
		os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envCrashDir+"="+filepath.Join(dir, "data"), envCrashAddr+"="+addrFile)
	// strace and its tracee share a process group of their own: killing strace
	// alone detaches the broker child, which then ran on until its own -test.timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	var addr string
	for i := 0; i < 300 && addr == ""; i++ {
		if b, err := os.ReadFile(addrFile); err == nil {
			addr = string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if addr == "" {
		b, _ := os.ReadFile(out)
		if os.Getenv("CI") != "" {
			t.Fatalf("broker under strace did not start (ptrace not permitted?): %s", b)
		}
		t.Skipf("broker under strace did not start (ptrace not permitted?): %s", b)
	}
	ctx := ctxT(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("st"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := 0; i < 64; i++ {
		rs = append(rs, &kgo.Record{Value: make([]byte, 1024)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("st"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < 64; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	b, _ := os.ReadFile(out)
	var calls []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "sendfile(") && !strings.Contains(l, "= -1") {
			calls = append(calls, l)
		}
	}
	if len(calls) == 0 {
		t.Fatalf("no successful sendfile in strace output:\n%s", b)
	}
	t.Logf("%d sendfile calls, e.g. %s", len(calls), calls[0])
}
