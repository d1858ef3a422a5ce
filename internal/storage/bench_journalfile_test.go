package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/vfs"
)

// BenchmarkJournalFileFirstPass compares the ways to make a journal file
// ready on the raw file system, and what each costs the rounds of its
// first pass (a write of the round's bytes and one fdatasync, at the
// next position): the time until the first round can use the file and the
// rounds' time through the whole file.
//
//   - zerofill: the file is written with zeros and fsynced before use (the
//     journal until session 6), so a round overwrites allocated blocks and
//     its fdatasync commits no metadata;
//   - fallocate: fallocate(2) + ftruncate + fsync, ready at once; the first
//     pass writes into unwritten extents, whose conversion each round's
//     fdatasync commits (a metadata journal commit of the file system);
//   - recycled: a file already written once (as one retired by a
//     checkpoint and reused): the cost after the first pass.
//
// Methods alternate (b.N passes of each, in turn) so they see the same
// machine state; read ms to ready and MB/s per method against each other.
//
//	go test ./internal/storage -run '^$' -bench JournalFileFirstPass -benchtime 3x
func BenchmarkJournalFileFirstPass(b *testing.B) {
	for _, c := range []struct{ file, round int64 }{{16 << 20, 256 << 10}, {16 << 20, 1 << 20}} {
		b.Run(fmt.Sprintf("file=%dMiB/round=%dKiB", c.file>>20, c.round>>10), func(b *testing.B) {
			journalFirstPass(b, c.file, c.round)
		})
	}
}

func journalFirstPass(b *testing.B, size, round int64) {
	dir := b.TempDir()
	fsys := vfs.OS{}
	buf := make([]byte, round)
	for i := range buf {
		buf[i] = byte(i * 13)
	}
	type method struct {
		name          string
		ready, rounds time.Duration
		bytes         int64
	}
	methods := []*method{{name: "zerofill"}, {name: "fallocate"}, {name: "recycled"}}
	open := func(m *method, i int) (vfs.File, error) {
		name := filepath.Join(dir, fmt.Sprintf("%s-%d", m.name, i))
		if m.name == "recycled" {
			if f, err := fsys.OpenFile(name, os.O_RDWR, 0); err == nil {
				return f, nil
			}
			// First use: written once, not timed as ready.
			f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return nil, err
			}
			return f, zeroFill(f, size)
		}
		os.Remove(name)
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if m.name == "zerofill" {
			err = zeroFill(f, size)
		} else {
			err = allocateFile(fsys, f, size)
		}
		if err == nil {
			err = fsys.SyncDir(dir)
		}
		m.ready += time.Since(start)
		return f, err
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, m := range methods {
			f, err := open(m, 0)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for off := int64(0); off+round <= size; off += round {
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				m.bytes += round
			}
			m.rounds += time.Since(start)
			f.Close()
		}
	}
	b.StopTimer()
	for _, m := range methods {
		b.ReportMetric(float64(m.ready.Microseconds())/1000/float64(b.N), m.name+"-ms-ready")
		b.ReportMetric(float64(m.bytes)/(1<<20)/m.rounds.Seconds(), m.name+"-MB/s")
	}
}

// zeroFill writes size zero bytes to f and fsyncs it: how the journal
// prepared its files before allocateFile (the benchmark's baseline).
func zeroFill(f vfs.File, size int64) error {
	buf := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return fmt.Errorf("preallocate journal %s: %w", f.Name(), err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync journal %s: %w", f.Name(), err)
	}
	return nil
}
