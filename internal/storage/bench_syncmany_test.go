package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/parallel"
	"golang.org/x/sys/unix"
)

// BenchmarkRawManyFilesSync compares, on the raw file system, the ways to
// make one group-commit round durable when the round wrote a little to
// each of many files (one segment per partition): what a produce round
// over many partitions asks of the disk. Each round appends perFile bytes
// to each of n files, then:
//
//   - fdatasync16: fdatasync of every file, 16 at a time (Strata's syncer
//     before the journal);
//   - fdatasyncAll: fdatasync of every file, all at once;
//   - sfr+fdatasync16: sync_file_range(WRITE) on every file to start the
//     writeback, then fdatasync 16 at a time;
//   - syncfs: one syncfs(2) of the file system;
//   - journal: the round's bytes also written, packed, to one pre-written
//     journal file and one fdatasync of it; the files themselves are
//     flushed by a syncfs every 64 MiB of journal (counted in).
//
// Methods run in alternating phases of 20 rounds (each on its own files,
// sync(2) between phases) so they see the same machine state; the metric
// to read is each method's ms per round and MB/s relative to the others.
//
//	go test ./internal/storage -run '^$' -bench RawManyFilesSync -benchtime 5x
func BenchmarkRawManyFilesSync(b *testing.B) {
	for _, c := range []struct{ files, perFile int }{{1, 256 << 10}, {4, 64 << 10}, {16, 16 << 10}, {100, 4 << 10}, {1000, 2 << 10}} {
		b.Run(fmt.Sprintf("files=%d/bytes=%d", c.files, c.perFile), func(b *testing.B) {
			rawManyFiles(b, c.files, c.perFile)
		})
	}
}

type syncMethod struct {
	name  string
	files []*os.File
	off   int64
	jrnl  *os.File
	jpos  int64
	dur   time.Duration
	sync  func(m *syncMethod, round []byte) error
}

const rawJournalSize = 64 << 20

func rawManyFiles(b *testing.B, n, perFile int) {
	dir := b.TempDir()
	buf := make([]byte, perFile)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	fdatasync := func(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
	methods := []*syncMethod{
		{name: "fdatasync16", sync: func(m *syncMethod, _ []byte) error { return parallel.Each(m.files, 16, fdatasync) }},
		{name: "fdatasyncAll", sync: func(m *syncMethod, _ []byte) error { return parallel.Each(m.files, len(m.files), fdatasync) }},
		{name: "sfr+fdatasync16", sync: func(m *syncMethod, _ []byte) error {
			for _, f := range m.files {
				if err := unix.SyncFileRange(int(f.Fd()), m.off-int64(perFile), int64(perFile), unix.SYNC_FILE_RANGE_WRITE); err != nil {
					return err
				}
			}
			return parallel.Each(m.files, 16, fdatasync)
		}},
		{name: "syncfs", sync: func(m *syncMethod, _ []byte) error { return unix.Syncfs(int(m.files[0].Fd())) }},
		{name: "journal", sync: func(m *syncMethod, round []byte) error {
			if m.jpos+int64(len(round)) > rawJournalSize {
				// Checkpoint: the files' bytes become durable, the journal
				// is reused from the start.
				if err := unix.Syncfs(int(m.files[0].Fd())); err != nil {
					return err
				}
				m.jpos = 0
			}
			if _, err := m.jrnl.WriteAt(round, m.jpos); err != nil {
				return err
			}
			m.jpos += int64(len(round))
			return fdatasync(m.jrnl)
		}},
	}
	for _, m := range methods {
		sub := filepath.Join(dir, m.name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			f, err := os.Create(filepath.Join(sub, fmt.Sprintf("%05d.log", i)))
			if err != nil {
				b.Fatal(err)
			}
			m.files = append(m.files, f)
		}
		if m.name == "journal" {
			f, err := os.Create(filepath.Join(sub, "journal"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.WriteAt(make([]byte, rawJournalSize), 0); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			m.jrnl = f
		}
	}
	b.Cleanup(func() {
		for _, m := range methods {
			for _, f := range m.files {
				f.Close()
			}
			if m.jrnl != nil {
				m.jrnl.Close()
			}
		}
	})
	round := make([]byte, 0, n*perFile)
	for range n {
		round = append(round, buf...)
	}
	const phase = 20
	unix.Sync()
	b.ResetTimer()
	for range b.N {
		for _, m := range methods {
			unix.Sync()
			start := time.Now()
			for range phase {
				for _, f := range m.files {
					if _, err := f.WriteAt(buf, m.off); err != nil {
						b.Fatal(err)
					}
				}
				m.off += int64(perFile)
				if err := m.sync(m, round); err != nil {
					b.Fatalf("%s: %v", m.name, err)
				}
			}
			m.dur += time.Since(start)
		}
	}
	b.StopTimer()
	// The journal's outstanding file bytes are flushed too (its last
	// checkpoint), so every method leaves the same durable state.
	for _, m := range methods {
		if m.name == "journal" {
			start := time.Now()
			unix.Syncfs(int(m.files[0].Fd()))
			m.dur += time.Since(start)
		}
	}
	rounds := float64(b.N * phase)
	for _, m := range methods {
		ms := float64(m.dur.Microseconds()) / 1e3 / rounds
		b.ReportMetric(ms, m.name+"-ms/round")
		b.ReportMetric(float64(n*perFile)*rounds/m.dur.Seconds()/1e6, m.name+"-MB/s")
	}
}
