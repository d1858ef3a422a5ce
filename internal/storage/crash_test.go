package storage

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

// The crash test re-executes the test binary as a child that appends with
// acks=all and prints "ack <base> <writer> <seq>" after each WaitDurable.
const crashChildEnv = "STRATA_STORAGE_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashBatch is the deterministic batch of writer w, sequence i.
func crashBatch(w, i int) []byte {
	recs := make([]record.Record, 1+(w+i)%8)
	for j := range recs {
		recs[j] = record.Record{TimestampDelta: int64(j), Key: []byte(strconv.Itoa(j)),
			Value: []byte(strings.Repeat(fmt.Sprintf("w%d-i%d-r%d;", w, i, j), 1+(i%5)*20))}
	}
	return recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: int64(i), ProducerID: -1, BaseSequence: -1}, recs...)
}

func crashConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 10
	c.SegmentIndexBytes = 4096
	c.IndexIntervalBytes = 1024
	return c
}

func crashChild(dir string) {
	start, _ := strconv.Atoi(os.Getenv("STRATA_STORAGE_CRASH_START"))
	l, err := Open(dir, [16]byte{}, crashConfig(), false, Options{FS: vfs.Default(), Logger: quiet})
	if err != nil {
		fmt.Println("openerr", err)
		os.Exit(3)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := start; ; i++ {
				res, err := l.Append(crashBatch(w, i), AppendOptions{LeaderEpoch: 1})
				if err != nil {
					fmt.Println("appenderr", err)
					os.Exit(4)
				}
				if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
					os.Exit(5)
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %d %d %d\n", res.BaseOffset, w, i)
				out.Flush()
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
}

// TestCrashKill runs the child, SIGKILLs it at random moments, recovers
// and proves that every acknowledged batch reads back byte-identical and
// that everything readable is a valid batch written by the child.
func TestCrashKill(t *testing.T) {
	rounds := 5
	if os.Getenv("STRATA_LONG") == "1" {
		rounds = 60
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() + "/crash-0"
	type ack struct{ w, i int }
	acked := map[int64]ack{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	seq := 0
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "STRATA_STORAGE_CRASH_START="+strconv.Itoa(seq))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		time.AfterFunc(time.Duration(20+rng.IntN(300))*time.Millisecond, func() { cmd.Process.Signal(syscall.SIGKILL) })
		n := 0
		for ln := range lines {
			var base int64
			var w, i int
			if _, err := fmt.Sscanf(ln, "ack %d %d %d", &base, &w, &i); err != nil {
				t.Fatalf("child said %q", ln)
			}
			acked[base] = ack{w, i}
			n++
		}
		cmd.Wait()
		seq += 100000 // fresh sequence numbers for the next child
		// Recover and check.
		l, err := Open(dir, [16]byte{}, crashConfig(), false, Options{FS: vfs.Default(), Logger: quiet})
		if err != nil {
			t.Fatalf("round %d: recover: %v", round, err)
		}
		got := readAll(t, l, 0)
		byBase := map[int64]record.Batch{}
		next := int64(0)
		for _, b := range got {
			if b.BaseOffset() != next {
				t.Fatalf("round %d: batch at %d after end %d", round, b.BaseOffset(), next)
			}
			next = b.LastOffset() + 1
			byBase[b.BaseOffset()] = b
		}
		// Unacknowledged batches may survive, but only as batches the
		// child wrote: rebuild each from the writer/sequence in its first
		// record and compare.
		for base, b := range byBase {
			recs, err := b.Records()
			if err != nil || len(recs) == 0 {
				t.Fatalf("round %d: batch at %d undecodable: %v", round, base, err)
			}
			var w, i, r int
			if _, err := fmt.Sscanf(string(recs[0].Value), "w%d-i%d-r%d;", &w, &i, &r); err != nil {
				t.Fatalf("round %d: batch at %d holds foreign data %q", round, base, recs[0].Value[:min(20, len(recs[0].Value))])
			}
			want := record.Batch(crashBatch(w, i))
			want.SetBaseOffset(base)
			want.SetPartitionLeaderEpoch(1)
			if string(want) != string(b) {
				t.Fatalf("round %d: batch at %d is not what writer %d wrote as #%d", round, base, w, i)
			}
		}
		for base, a := range acked {
			b, ok := byBase[base]
			if !ok {
				t.Fatalf("round %d: acknowledged batch at %d lost", round, base)
			}
			want := record.Batch(crashBatch(a.w, a.i))
			want.SetBaseOffset(base)
			want.SetPartitionLeaderEpoch(1)
			if string(want) != string(b) {
				t.Fatalf("round %d: batch at %d differs from what was acknowledged", round, base)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d acks this round, %d total, leo %d", round, n, len(acked), next)
	}
}
