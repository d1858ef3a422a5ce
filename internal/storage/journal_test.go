package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

// journalDir is openJournalDir with the journal's files prepared.
func journalDir(t testing.TB, fsys vfs.FS, n int, cfg Config, fileSize int64, clean bool) (*Syncer, []*Log) {
	t.Helper()
	s, logs := openJournalDir(t, fsys, n, cfg, fileSize, clean)
	// The files are prepared when a round first wants them; tests want
	// the journal from the first round.
	s.jrnl.reserve(0)
	s.jrnl.wait()
	if !s.jrnl.isReady() {
		t.Fatalf("journal not ready: %v", s.jrnl.err())
	}
	return s, logs
}

// checkAcked reads every partition back and checks that it is a gap-free
// sequence of valid batches holding every acknowledged batch byte for byte.
func checkAcked(t *testing.T, what string, logs []*Log, acked map[int][]ackedBatch) {
	t.Helper()
	for i, l := range logs {
		got := readAll(t, l, l.LogStartOffset())
		byBase := map[int64]record.Batch{}
		next := int64(-1)
		for _, b := range got {
			if next >= 0 && b.BaseOffset() != next {
				t.Fatalf("%s: partition %d: gap or overlap: batch at %d after end %d", what, i, b.BaseOffset(), next)
			}
			next = b.LastOffset() + 1
			byBase[b.BaseOffset()] = b
		}
		for _, a := range acked[i] {
			b, ok := byBase[a.base]
			if !ok {
				t.Fatalf("%s: partition %d: acknowledged batch at %d lost (end %d, %d acked)", what, i, a.base, l.LogEndOffset(), len(acked[i]))
			}
			if len(b) != len(a.bytes) || string(b[12:]) != string(a.bytes[12:]) || int64(binary.BigEndian.Uint64(b)) != a.base {
				t.Fatalf("%s: partition %d: batch at %d differs", what, i, a.base)
			}
		}
	}
}

func closeAll(t testing.TB, s *Syncer, logs []*Log) {
	t.Helper()
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// powerCutImage is a power-cut image of the file system and what had been
// acknowledged when it was taken.
type powerCutImage struct {
	fs    *vfs.CrashFS
	acked map[int][]ackedBatch
}

// appendWithPowerCuts runs writers goroutines, each appending appends
// batches of 1-4 records to random logs (at leader epoch epoch) and waiting
// until each is durable; after an acknowledgement, one time in odds, it
// takes a power-cut image of fsys (half of them with torn writes). It
// returns what was acknowledged and the images (the caller takes the last
// one once everything else touching the logs has stopped).
func appendWithPowerCuts(t *testing.T, fsys *vfs.CrashFS, logs []*Log, writers, appends int, epoch int32, seed uint64, odds int) (map[int][]ackedBatch, []powerCutImage) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	var mu sync.Mutex
	acked := map[int][]ackedBatch{}
	var images []powerCutImage
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() { // owner: appendWithPowerCuts; ends after its appends
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), seed))
			for i := range appends {
				p := r.IntN(len(logs))
				b := mkBatch(t, 1+r.IntN(4), fmt.Sprintf("w%d-%d", w, i), int64(i))
				res, err := logs[p].Append(b, AppendOptions{LeaderEpoch: epoch})
				if err == nil {
					err = logs[p].WaitDurable(context.Background(), res.LastOffset+1)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[p] = append(acked[p], ackedBatch{res.BaseOffset, b})
				switch rng.IntN(odds) {
				case 0:
					images = append(images, powerCutImage{fsys.Crash(), snapshotAcked(acked)})
				case 1:
					images = append(images, powerCutImage{fsys.CrashTorn(func(n int) int { return rng.IntN(n + 1) }), snapshotAcked(acked)})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked, images
}

// snapshotAcked copies acked.
func snapshotAcked(acked map[int][]ackedBatch) map[int][]ackedBatch {
	out := make(map[int][]ackedBatch, len(acked))
	for k, v := range acked {
		out[k] = append([]ackedBatch(nil), v...)
	}
	return out
}

// TestJournalPowerLossManyPartitions: writers append with acks=all to
// random partitions among a thousand, so group-commit rounds go through
// the journal (small files: it rotates and checkpoints all the time, and
// segments roll); power-cut images (exact and torn) taken at random
// moments each recover, replaying the journal, with every batch
// acknowledged before the cut back byte for byte.
func TestJournalPowerLossManyPartitions(t *testing.T) {
	parts, writers, appends := 1000, 8, 150
	if testing.Short() {
		parts, appends = 200, 60
	}
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	cfg.SegmentBytes = 3000
	s, logs := journalDir(t, fsys, parts, cfg, 64<<10, false)
	acked, images := appendWithPowerCuts(t, fsys, logs, writers, appends, 2, 5, 600)
	if t.Failed() {
		t.FailNow()
	}
	images = append(images, powerCutImage{fsys.Crash(), snapshotAcked(acked)})
	st := s.JournalStats()
	if st.Rounds == 0 || st.Checkpoints == 0 {
		t.Fatalf("the journal was not exercised: %+v", st)
	}
	t.Logf("journal: %+v, %d group-commit rounds in all, %d power-cut images", st, s.Rounds(), len(images))
	closeAll(t, s, logs)
	replayed := uint64(0)
	for k, im := range images {
		s2, logs2 := journalDir(t, im.fs, parts, cfg, 64<<10, false)
		replayed += s2.JournalStats().Replayed
		checkAcked(t, fmt.Sprintf("image %d", k), logs2, im.acked)
		closeAll(t, s2, logs2)
	}
	if replayed == 0 {
		t.Errorf("no image needed the journal: the test proves nothing")
	}
	// A clean shutdown voids the journal: nothing to replay.
	s3, logs3 := journalDir(t, fsys, parts, cfg, 64<<10, true)
	if n := s3.JournalStats().Replayed; n != 0 {
		t.Errorf("clean start replayed %d records", n)
	}
	checkAcked(t, "clean start", logs3, acked)
	closeAll(t, s3, logs3)
}

// TestJournalCutNotReplayed: bytes cut by TruncateTo (a follower's
// truncation) are never replayed from the journal, while bytes appended
// after the cut are; the same for TruncateFullyAndStartAt.
func TestJournalCutNotReplayed(t *testing.T) {
	const parts = 8
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	s, logs := journalDir(t, fsys, parts, cfg, 1<<20, false)
	acked := map[int][]ackedBatch{}
	var mu sync.Mutex
	round := func(tag string) {
		// Every partition appends while the syncer's round lock is held,
		// so its next round covers all of them (a round of fewer than
		// journalMinFiles files bypasses the journal, and which appends a
		// round catches would otherwise be up to the scheduler).
		s.roundMu.Lock()
		ress := make([]AppendResult, parts)
		bs := make([][]byte, parts)
		for p := range parts {
			bs[p] = mkBatch(t, 2, tag, 1)
			res, err := logs[p].Append(bs[p], AppendOptions{LeaderEpoch: 1})
			if err != nil {
				s.roundMu.Unlock()
				t.Fatalf("append: %v", err)
			}
			ress[p] = res
		}
		s.roundMu.Unlock()
		var wg sync.WaitGroup
		for p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := logs[p].WaitDurable(context.Background(), ress[p].LastOffset+1); err != nil {
					t.Error(err)
				}
				mu.Lock()
				acked[p] = append(acked[p], ackedBatch{ress[p].BaseOffset, bs[p]})
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	// A round covers the appends the syncer finds pending, so under load
	// some rounds catch fewer than journalMinFiles partitions and bypass
	// the journal: go on (up to 30 rounds, 60 records, below the restart
	// offset 100 used below) until one used it.
	for i := 0; i < 6 || (i < 30 && s.JournalStats().Rounds == 0); i++ {
		round(fmt.Sprint("a", i))
	}
	if s.JournalStats().Rounds == 0 {
		t.Fatal("rounds did not use the journal")
	}
	// Partition 0 cut at 6 (3 batches kept), partition 1 restarted at 100.
	if end, err := logs[0].TruncateTo(6); err != nil || end != 6 {
		t.Fatalf("truncate: %d %v", end, err)
	}
	acked[0] = acked[0][:3]
	if err := logs[1].TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	acked[1] = nil
	for i := range 3 {
		round(fmt.Sprint("b", i))
	}
	want0, want1 := logs[0].LogEndOffset(), logs[1].LogEndOffset()
	img := fsys.Crash()
	closeAll(t, s, logs)
	s2, logs2 := journalDir(t, img, parts, cfg, 1<<20, false)
	defer closeAll(t, s2, logs2)
	checkAcked(t, "after the cuts", logs2, acked)
	if logs2[0].LogEndOffset() != want0 || logs2[1].LogEndOffset() != want1 || logs2[1].LogStartOffset() != 100 {
		t.Fatalf("ends after a crash: %d and %d (start %d), want %d and %d (start 100)",
			logs2[0].LogEndOffset(), logs2[1].LogEndOffset(), logs2[1].LogStartOffset(), want0, want1)
	}
}

// TestJournalOneFsyncPerRound: a round over many partitions fsyncs the
// journal once, not every segment.
func TestJournalOneFsyncPerRound(t *testing.T) {
	const parts = 64
	fsys := vfs.NewCrashFS()
	s, logs := journalDir(t, fsys, parts, testConfig(), 1<<20, false)
	defer closeAll(t, s, logs)
	// First writes: the new partition directories get their fsyncs.
	for _, l := range logs {
		res := mustAppend(t, l, mkBatch(t, 1, "first", 1))
		if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	ops := countOps(fsys)
	before := s.JournalStats().Rounds
	// Appends pile up while a round is held back, as they do while a
	// round's fsync is under way.
	appendInOneRound(t, s, logs, 1, map[int][]ackedBatch{}, func(int) []byte { return mkBatch(t, 1, "x", 1) })
	rounds := s.JournalStats().Rounds - before
	got := ops.take()
	fsys.SetHook(nil)
	if rounds == 0 || got["sync"] > int(rounds)+parts/journalMinFiles {
		t.Fatalf("%d partitions made durable with %d fsyncs in %d journal rounds (ops %v)", parts, got["sync"], rounds, got)
	}
	t.Logf("%d partitions: %d fsyncs, %d journal rounds", parts, got["sync"], rounds)
}

// TestJournalCrashAtEveryStep runs one scenario over a journaled log dir
// (rounds over many partitions through the journal, a file switch with
// its checkpoint, a follower's TruncateTo and TruncateFullyAndStartAt,
// more rounds, a clean close) and cuts the power before each of its file
// system operations in turn: every image recovers (replaying the journal)
// with every batch acknowledged before the cut back byte for byte, and a
// cut partition never gets back bytes the cut removed below what was
// appended after it.
func TestJournalCrashAtEveryStep(t *testing.T) {
	const parts = 6
	cfg := testConfig()
	cfg.SegmentBytes = 1500  // rolls during the scenario
	const fileSize = 2 << 10 // the journal switches files and checkpoints
	type state struct {
		acked     map[int][]ackedBatch
		restarted bool // partition 1 restarted at 100
	}
	var mu sync.Mutex
	var cur state
	snapshot := func() state {
		mu.Lock()
		defer mu.Unlock()
		return state{acked: snapshotAcked(cur.acked), restarted: cur.restarted}
	}
	// scenario drives the logs; it stops at the first error (the injected
	// failure of the step the power was cut at).
	scenario := func(s *Syncer, logs []*Log) error {
		// round appends to every partition while the syncer is held
		// back (so one round takes them all, through the journal), then
		// waits for them.
		round := func(tag string) error {
			bs := make([][]byte, parts)
			ress := make([]AppendResult, parts)
			s.roundMu.Lock()
			for p := range parts {
				bs[p] = mkBatch(t, 2, tag, 1)
				res, err := logs[p].Append(bs[p], AppendOptions{LeaderEpoch: 1})
				if err != nil {
					s.roundMu.Unlock()
					return err
				}
				ress[p] = res
			}
			s.roundMu.Unlock()
			var errs []error
			for p := range parts {
				if err := logs[p].WaitDurable(context.Background(), ress[p].LastOffset+1); err != nil {
					errs = append(errs, err)
					continue
				}
				mu.Lock()
				cur.acked[p] = append(cur.acked[p], ackedBatch{ress[p].BaseOffset, bs[p]})
				mu.Unlock()
			}
			return errors.Join(errs...)
		}
		for i := range 8 {
			if err := round(fmt.Sprint("a", i)); err != nil {
				return err
			}
		}
		// The cuts: what must survive is trimmed first (a cut that is
		// not yet durable may come back, the kept prefix must).
		mu.Lock()
		cur.acked[0] = cur.acked[0][:3]
		cur.acked[1] = nil
		mu.Unlock()
		if _, err := logs[0].TruncateTo(6); err != nil {
			return err
		}
		if err := logs[1].TruncateFullyAndStartAt(100); err != nil {
			return err
		}
		mu.Lock()
		cur.restarted = true
		mu.Unlock()
		for i := range 4 {
			if err := round(fmt.Sprint("b", i)); err != nil {
				return err
			}
		}
		for _, l := range logs {
			if err := l.Close(); err != nil {
				return err
			}
		}
		return s.Close()
	}
	run := func(fsys *vfs.CrashFS, crashAt int) (img *vfs.CrashFS, acked state, steps int) {
		s, logs := journalDir(t, fsys, parts, cfg, fileSize, false)
		mu.Lock()
		cur = state{acked: map[int][]ackedBatch{}}
		mu.Unlock()
		n := 0
		var hmu sync.Mutex
		fsys.SetHook(func(string, string) error {
			hmu.Lock()
			defer hmu.Unlock()
			defer func() { n++ }()
			if n == crashAt {
				img, acked = fsys.Crash(), snapshot()
				return vfs.ErrInjected
			}
			return nil
		})
		scenario(s, logs)
		fsys.SetHook(nil)
		for _, l := range logs {
			l.Close()
		}
		s.Close()
		if st := s.JournalStats(); crashAt < 0 && (st.Rounds == 0 || st.Checkpoints == 0) {
			t.Fatalf("the scenario did not exercise the journal: %+v", st)
		}
		return img, acked, n
	}
	_, _, steps := run(vfs.NewCrashFS(), -1)
	t.Logf("%d steps", steps)
	replayed := uint64(0)
	for k := 0; k < steps; k++ {
		img, acked, _ := run(vfs.NewCrashFS(), k)
		if img == nil {
			continue // this run made fewer steps (rounds group differently)
		}
		s2, logs2 := journalDir(t, img, parts, cfg, fileSize, false)
		replayed += s2.JournalStats().Replayed
		checkAcked(t, fmt.Sprintf("power cut before step %d", k), logs2, acked.acked)
		if acked.restarted && len(acked.acked[1]) > 0 && logs2[1].LogStartOffset() != 100 {
			t.Fatalf("step %d: partition 1 has batches acknowledged after its restart at 100 but starts at %d", k, logs2[1].LogStartOffset())
		}
		closeAll(t, s2, logs2)
	}
	if replayed == 0 {
		t.Errorf("no image needed the journal: the test proves nothing")
	}
}

// appendInOneRound appends batch(i) to every log i at leader epoch
// epoch while s's round waits, so that the appends pile up into one sync
// round, then waits until each is durable (at once, as producers do) and
// records it in acked. Any failure fails t.
func appendInOneRound(t *testing.T, s *Syncer, logs []*Log, epoch int32, acked map[int][]ackedBatch, batch func(i int) []byte) {
	t.Helper()
	s.roundMu.Lock()
	var wg sync.WaitGroup
	for i, l := range logs {
		b := batch(i)
		res, err := l.Append(b, AppendOptions{LeaderEpoch: epoch})
		if err != nil {
			s.roundMu.Unlock()
			t.Fatal(err)
		}
		acked[i] = append(acked[i], ackedBatch{res.BaseOffset, b})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
				t.Error(err)
			}
		}()
	}
	s.roundMu.Unlock()
	wg.Wait()
}

// TestJournalRoundInParts: a round larger than journalPart (eight
// partitions of ~400 KiB each) is built and written in parts, fsynced
// once, and a power cut right after it loses none of it: the replay finds
// every record of the round whole.
func TestJournalRoundInParts(t *testing.T) {
	const parts = 8
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 20
	s, logs := journalDir(t, fsys, parts, cfg, 4<<20, false)
	acked := map[int][]ackedBatch{}
	// First writes: the new partition directories get their fsyncs.
	for i, l := range logs {
		b := mkBatch(t, 1, "first", 1)
		res := mustAppend(t, l, b)
		if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
		acked[i] = append(acked[i], ackedBatch{res.BaseOffset, b})
	}
	big := make([]byte, 400<<10)
	for i := range big {
		big[i] = byte(i * 31)
	}
	writes := 0
	fsys.SetHook(func(op, name string) error {
		if op == "write" && strings.Contains(name, journalFilePrefix) {
			writes++
		}
		return nil
	})
	before := s.JournalStats()
	appendInOneRound(t, s, logs, 0, acked, func(int) []byte {
		return recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1},
			record.Record{Value: big})
	})
	fsys.SetHook(nil)
	after := s.JournalStats()
	if after.Rounds-before.Rounds != 1 || after.Bytes-before.Bytes < 2*journalPart || writes < 2 {
		t.Fatalf("want one journal round of %d+ bytes written in parts: %d rounds, %d bytes, %d writes",
			2*journalPart, after.Rounds-before.Rounds, after.Bytes-before.Bytes, writes)
	}
	if cap(s.jrnl.buf) > journalKeepBuf {
		t.Fatalf("journal keeps a %d-byte buffer", cap(s.jrnl.buf))
	}
	img := fsys.Crash()
	_, rlogs := journalDir(t, img, parts, cfg, 4<<20, false)
	checkAcked(t, "after the power cut", rlogs, acked)
	closeAll(t, s, logs)
}

// TestSyncFSRoundNewDirs: a round over many partitions just created makes
// them durable with one SyncFS of the log dir, not three fsyncs each
// (partition.metadata, leader epoch checkpoint, directory), and a power
// cut right after it keeps every acknowledged batch and epoch.
func TestSyncFSRoundNewDirs(t *testing.T) {
	const parts = 2 * syncFSNewDirs
	fsys := vfs.NewCrashFS()
	s, logs := journalDir(t, fsys, parts, testConfig(), 1<<20, false)
	ops := countOps(fsys)
	acked := map[int][]ackedBatch{}
	appendInOneRound(t, s, logs, 3, acked, func(int) []byte { return mkBatch(t, 2, "first", 1) })
	got := ops.take()
	fsys.SetHook(nil)
	if got["syncfs"] != 1 || got["sync"] != 0 || got["syncdir"] != 0 {
		t.Fatalf("first round over %d new partitions: %v, want one syncfs and no fsync", parts, got)
	}
	img := fsys.Crash()
	s2, rlogs := journalDir(t, img, parts, testConfig(), 1<<20, false)
	checkAcked(t, "after the power cut", rlogs, acked)
	for i, l := range rlogs {
		if ep := l.LeaderEpochs(); len(ep) != 1 || ep[0] != (EpochEntry{3, 0}) {
			t.Fatalf("partition %d: epochs %+v after the power cut", i, ep)
		}
	}
	closeAll(t, s2, rlogs)
	closeAll(t, s, logs)
}

// TestJournalReusedFileStaleRecordsNotReplayed: a journal file reused
// after its checkpoint is overwritten from its start under a newer
// generation, and what the earlier pass wrote past the new records stays
// there with valid CRCs. A power cut then must replay only the new
// records: the reader stops at the first record of another generation
// (the CRC alone would accept the stale ones). Checked on the image: the
// reused file holds CRC-valid records of an older generation right after
// the new ones, none of them is read, and every acknowledged batch is back.
func TestJournalReusedFileStaleRecordsNotReplayed(t *testing.T) {
	const parts = 8
	const fileSize = 8 << 10
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	s, logs := journalDir(t, fsys, parts, cfg, fileSize, false)
	acked := map[int][]ackedBatch{}
	// Rounds until file 0 was filled, checkpointed and written again
	// (the third file switch), with the next switch still ahead.
	var img *vfs.CrashFS
	var imgAcked map[int][]ackedBatch
	for i := 0; i < 400 && img == nil; i++ {
		// Rounds of one size: a record of the new pass starts where one of
		// the earlier pass did (the stale record is whole and aligned).
		journalRound(t, s, logs, fmt.Sprintf("r%03d", i), acked)
		s.jrnl.wait() // the checkpoint of the full file is done: it may be reused
		if s.jrnl.gen >= 3 && s.jrnl.cur == 0 && s.jrnl.pos > 0 && s.jrnl.pos < fileSize/2 {
			img, imgAcked = fsys.Crash(), snapshotAcked(acked)
		}
	}
	if img == nil {
		t.Fatalf("file 0 never reused: %+v", s.JournalStats())
	}
	gen := s.jrnl.gen
	closeAll(t, s, logs)

	f, err := img.OpenFile(journalPath("/data", 0), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	recs, fileGen, err := readJournalFile(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fileGen != gen || len(recs) == 0 {
		t.Fatalf("reused file read as generation %d with %d records, want generation %d", fileGen, len(recs), gen)
	}
	for _, kr := range recs {
		if kr.r.gen != gen {
			t.Fatalf("a record of generation %d read from the file reused under generation %d", kr.r.gen, gen)
		}
	}
	last := recs[len(recs)-1].r
	end := last.pos + last.size
	staleGen, ok := jrecGenAt(t, f, end)
	f.Close()
	if !ok || staleGen >= gen {
		t.Fatalf("no CRC-valid record of an older generation after the new ones (at %d: generation %d, valid %v): the test proves nothing", end, staleGen, ok)
	}
	s2, logs2 := journalDir(t, img, parts, cfg, fileSize, false)
	checkAcked(t, "reused file", logs2, imgAcked)
	for i, l := range logs2 {
		if want := imgAcked[i][len(imgAcked[i])-1]; l.LogEndOffset() != want.base+2 {
			t.Errorf("partition %d ends at %d, want %d (the last acknowledged batch's end): stale records replayed?", i, l.LogEndOffset(), want.base+2)
		}
	}
	closeAll(t, s2, logs2)
}

// jrecGenAt reads the journal record at pos of f and returns its
// generation and whether its CRC holds.
func jrecGenAt(t *testing.T, f vfs.File, pos int64) (uint64, bool) {
	t.Helper()
	var hdr [8]byte
	if _, err := f.ReadAt(hdr[:], pos); err != nil {
		return 0, false
	}
	length := int64(binary.BigEndian.Uint32(hdr[:]))
	if length < jrnlFixedHeader-4 {
		return 0, false
	}
	body := make([]byte, length-4)
	if _, err := f.ReadAt(body, pos+8); err != nil {
		return 0, false
	}
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(hdr[4:]) {
		return 0, false
	}
	return binary.BigEndian.Uint64(body), true
}

// TestJournalCheckpointWritesRecoveryPoints: a journal checkpoint (a file
// filled, one SyncFS) writes the recovery-point checkpoint file with the
// recovery points it moved, so that after a kill -9 (no periodic
// checkpoint, no close) what recovery must re-read past the recovery
// points is bounded by the journal's two files, not by everything the
// logs received since the broker last wrote the file. The kill -9 image
// and a power-cut image both recover every acknowledged batch.
func TestJournalCheckpointWritesRecoveryPoints(t *testing.T) {
	const (
		parts    = 20
		rounds   = 40
		fileSize = 8 << 10
	)
	fsys := vfs.NewCrashFS()
	s, logs := journalDir(t, fsys, parts, testConfig(), fileSize, false)
	acked := map[int][]ackedBatch{}
	batchLen := int64(0)
	for r := range rounds {
		journalRound(t, s, logs, fmt.Sprint("r", r), acked)
		batchLen = int64(len(acked[0][len(acked[0])-1].bytes))
	}
	s.jrnl.wait() // the checkpoints started by the rounds
	st := s.JournalStats()
	if st.Checkpoints < 2 {
		t.Fatalf("the rounds checkpointed %d journal files, want several: %+v", st.Checkpoints, st)
	}
	killed, cut := fsys.Clone(), fsys.Crash()
	s.roundMu.Lock() // the killed process's syncer does nothing more
	defer s.roundMu.Unlock()

	ents, err := ReadCheckpoint(killed, "/data/"+RecoveryPointFile)
	if err != nil {
		t.Fatal(err)
	}
	rps := map[string]int64{}
	for _, e := range ents {
		rps[fmt.Sprintf("%s-%d", e.Topic, e.Partition)] = e.Offset
	}
	var past int64 // segment bytes past the recovery points on disk
	for i, l := range logs {
		rp, ok := rps[fmt.Sprintf("j-%d", i)]
		if !ok {
			rp = 0
		}
		past += (l.LogEndOffset() - rp) / 2 * batchLen // 2 records a batch
	}
	if total := int64(parts*rounds) * batchLen; past > 2*fileSize {
		t.Fatalf("after kill -9, %d of the %d segment bytes lie past the recovery points on disk; want at most the journal's two files (%d)", past, total, 2*fileSize)
	}
	for _, c := range []struct {
		name string
		img  *vfs.CrashFS
	}{{"kill-9", killed}, {"power-cut", cut}} {
		s2, logs2 := journalDir(t, c.img, parts, testConfig(), fileSize, false)
		checkAcked(t, c.name, logs2, acked)
		closeAll(t, s2, logs2)
	}
}

// TestFileWindow: in-order reads through the window (readJournalFile's
// reader) return exactly the file's bytes, across chunk refills, for
// reads larger than a chunk and short at the end of the file.
func TestFileWindow(t *testing.T) {
	fsys := vfs.NewCrashFS()
	data := make([]byte, 3*journalReadChunk+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	f, err := fsys.OpenFile("/w", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	w := &fileWindow{f: f, buf: make([]byte, journalReadChunk)}
	pos := int64(0)
	for i, n := range []int{8, 100, journalReadChunk - 50, 8, 3 * journalReadChunk / 2, 1, 70000, 8, 2 * journalReadChunk} {
		got, err := w.at(pos, n)
		if err != nil {
			t.Fatal(err)
		}
		want := data[pos:min(pos+int64(n), int64(len(data)))]
		if !bytes.Equal(got, want) {
			t.Fatalf("read %d (%d bytes at %d): got %d bytes, want %d, or different", i, n, pos, len(got), len(want))
		}
		pos += int64(len(got))
	}
	if pos != int64(len(data)) {
		t.Fatalf("read %d of %d bytes", pos, len(data))
	}
}
