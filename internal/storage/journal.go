package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// The journal is a log dir's write-ahead journal for durable (acks=all)
// appends over many partitions. A group-commit round that would fsync
// many segment files instead copies the round's new bytes of every
// partition (read back from the segments' page cache) into one journal
// file with one pwrite and fsyncs that file once: one fdatasync per round
// whatever the partition count. The segments stay Kafka's format and are
// what fetches read (sendfile); their bytes reach the disk by the kernel's
// write-back and by the journal's checkpoint, after which the journal
// space is reused. After a crash, recovery replays into each segment the
// journaled bytes past what the segment kept, as Apache BookKeeper's
// bookies replay their journal into ledger storage.
//
// Two preallocated files alternate (strata-journal-0 and strata-journal-1
// at the root of the log dir, fallocate'd and sized at creation, then
// overwritten in place: after a file's first pass, whose rounds commit
// the conversion of the extents they wrote, an fdatasync needs no
// metadata commit). They exist only while they are of use: created by
// the round that first spans many partitions (in milliseconds: the
// blocks are allocated, not written; zero-filling 2 x 64 MiB took
// seconds on a loaded disk, during which the rounds fsynced every
// segment), sized to the disk (each at most strata.log.journal.bytes and
// 1/16 of the free space then, so both take at most an eighth of it; none
// when that is under 1 MiB), removed again after journalIdleRelease
// without a journal round, at a clean shutdown and at the next start
// (after recovery read them). A file fills from its start with
// records of one generation; when a round does not fit, the other file
// takes over under the next generation and the full one is checkpointed in
// the background: one SyncFS of the log dir makes every segment byte it
// covered durable, the logs' flushed marks (and so their recovery points)
// move past them, and the file's first record is zeroed so that nothing
// in it is replayed again. A round finding the other file not yet
// checkpointed fsyncs its segment files directly instead.
//
// Record layout (big endian), CRC-32C over everything after the crc field:
//
//	length     u32   bytes after this field
//	crc        u32
//	generation u64   the file's generation
//	kind       u8    1 = the bytes of a partition, 2 = the partition is
//	                 cut (TruncateTo): earlier records of it are void
//	topic id   16 bytes
//	partition  i32
//	topic      u16 length + bytes
//	segment    i64   base offset of the segment the bytes were written to
//	position   i64   byte position in that segment
//	payload    the record batches exactly as in the segment
const (
	journalFilePrefix = "strata-journal-"
	jrnlKindBatches   = 1
	jrnlKindTruncate  = 2
	jrnlFixedHeader   = 4 + 4 + 8 + 1 + 16 + 4 + 2 + 8 + 8
	jrnlVoidMarker    = 4 + 4 + 8
	// DefaultJournalFileBytes is the size of each of the two journal
	// files of a log dir.
	DefaultJournalFileBytes = 64 << 20
	// journalDiskShare: each journal file takes at most this fraction of
	// the log dir's free space when it is created.
	journalDiskShare = 16
	// journalMinFileBytes is the smallest file the journal shrinks to for
	// lack of space (or the configured size when smaller); below it the
	// rounds fsync segments directly and creation is tried again after
	// journalRetry.
	journalMinFileBytes = 1 << 20
	journalRetry        = time.Minute
	// journalIdleRelease: the files are removed (their bytes made durable
	// in the segments first) when no round used them for this long.
	journalIdleRelease = 2 * time.Minute
	// journalMinFiles is the fewest segment files a round must have to
	// fsync for the journal to be used: below it, fsyncing them directly
	// costs no more than the journal's write and fsync, and avoids
	// writing the bytes twice (one partition keeps ~95% of the disk's
	// fsync'ed append rate).
	journalMinFiles = 4
	// journalPart is how much of a round is built in memory before it is
	// written (the round's records are written in parts, then fsynced
	// once): a round over a thousand partitions of a 50 MB produce request
	// needs no 50 MB buffer. A record is never split, so one partition's
	// bytes of a round larger than this make a larger part.
	journalPart = 1 << 20
	// journalKeepBuf: a part buffer grown past this (one large record) is
	// not kept for the next round.
	journalKeepBuf = 4 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// jrec locates one journal record.
type jrec struct {
	kind    byte
	gen     uint64
	file    int
	pos     int64 // payload position in the file
	size    int64 // payload length
	segBase int64
	segPos  int64
}

// jkey identifies a partition in the journal.
type jkey struct {
	id        [16]byte
	topic     string
	partition int32
}

// journal is one log dir's journal, owned by the dir's Syncer. The write
// state is used by the Syncer's rounds (one at a time, under its roundMu)
// and by the background checkpoints (under mu).
type journal struct {
	fsys    vfs.FS
	dir     string
	logger  *slog.Logger
	maxSize int64 // strata.log.journal.bytes
	syncFS  vfs.SyncFS
	now     func() time.Time
	space   *Reserve // the log dir's free-space reserve (nil: none)

	// files are open while they exist: from open (a previous run's, for
	// recovery) to start, and from prepare to release.
	files [2]vfs.File
	// recs are the records found at open, by partition, oldest first; the
	// logs replay them while they open, until start.
	recs map[jkey][]jrec

	started  bool
	cur      int       // file being written
	pos      int64     // next write position in it
	gen      uint64    // its generation
	buf      []byte    // the round being built
	lastUsed time.Time // last round written (under the syncer's round lock)

	mu       sync.Mutex
	fileSize int64    // size of each prepared file (set with ready)
	covered  [2]jlogs // per file: logs with bytes in it and the mark they reach
	busy     [2]bool  // the file's checkpoint is running
	ready    bool     // both files prepared
	retryAt  time.Time
	failed   error
	stats    JournalStats
	ckpts    sync.WaitGroup
	// checkpointed runs after each checkpoint (set by the Syncer): it
	// writes the recovery points the checkpoint moved to the log dir's
	// recovery-point checkpoint file.
	checkpointed func()
}

// jlogs maps a log to the furthest mark of its bytes in a journal file.
type jlogs map[*Log]jreach

// jreach is how far a log's journaled bytes reach, and the log's cut
// count when they were journaled (Log.cuts): after a cut the mark no
// longer names bytes of the log.
type jreach struct {
	mark writeMark
	cuts uint64
}

// JournalStats counts what a log dir's journal did.
type JournalStats struct {
	Rounds      uint64 // group-commit rounds made durable by the journal
	Records     uint64 // partition records written
	Bytes       uint64 // record bytes written
	Checkpoints uint64 // files checkpointed (SyncFS of the dir)
	Fallbacks   uint64 // rounds that fsynced segments directly for want of journal space
	Replayed    uint64 // records replayed into segments at recovery
	Created     uint64 // times the files were created (sized to the disk)
	Released    uint64 // times idle files were removed
	FileBytes   int64  // size of each file now (0: none)
}

func journalPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("%s%d", journalFilePrefix, i))
}

// openJournal opens the journal files a previous run of dir left (none
// is created here: see prepare) and indexes their records for the
// recovery of the dir's logs.
func openJournal(fsys vfs.FS, dir string, maxSize int64, logger *slog.Logger) (*journal, error) {
	j := &journal{fsys: fsys, dir: dir, logger: logger, maxSize: maxSize, now: time.Now, recs: map[jkey][]jrec{}}
	sfs, err := fsys.OpenSyncFS(dir)
	if err != nil {
		return nil, fmt.Errorf("journal of %s: %w", dir, err)
	}
	j.syncFS = sfs
	var found []struct {
		k jkey
		r jrec
	}
	for i := range j.files {
		name := journalPath(dir, i)
		if _, err := fsys.Stat(name); errNotExist(err) {
			continue
		}
		f, err := fsys.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			j.close()
			return nil, fmt.Errorf("open journal %s: %w", name, err)
		}
		j.files[i] = f
		recs, gen, err := readJournalFile(f, i)
		if err != nil {
			j.close()
			return nil, err
		}
		j.gen = max(j.gen, gen)
		found = append(found, recs...)
	}
	sort.SliceStable(found, func(a, b int) bool { return found[a].r.gen < found[b].r.gen })
	for _, kr := range found {
		j.recs[kr.k] = append(j.recs[kr.k], kr.r)
	}
	return j, nil
}

// prepare creates both files, sized to the disk and allocated
// (allocateFile: milliseconds, so the round that first wants them waits
// for them instead of fsyncing its segments one by one), when a round
// first spans many partitions: a broker whose rounds never do never pays
// for them. A disk without room for them (or a failed allocation) leaves
// no file behind; creation is tried again after journalRetry. The caller
// holds the syncer's round lock, not j.mu.
func (j *journal) prepare() {
	size, err := j.plannedSize()
	if err == nil {
		err = j.space.take(2 * size)
	}
	if err == nil {
		err = j.createFiles(size)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil {
		j.retryAt = j.now().Add(journalRetry)
		j.logger.Info("write-ahead journal not created; group-commit rounds fsync segments directly", "dir", j.dir, "retry_in", journalRetry, "err", err)
		return
	}
	j.fileSize, j.ready = size, true
	j.lastUsed = j.now()
	j.stats.Created++
	j.stats.FileBytes = size
	j.logger.Info("write-ahead journal created", "dir", j.dir, "file_bytes", size)
}

// errJournalNoRoom: the disk is too small for the journal now.
var errJournalNoRoom = errors.New("not enough free space")

// plannedSize is the size of each file: strata.log.journal.bytes, or
// less on a disk with little free space (both files at most 1/8 of it),
// but not under journalMinFileBytes.
func (j *journal) plannedSize() (int64, error) {
	size := j.maxSize
	sfs, ok := j.fsys.(vfs.SpaceFS)
	if !ok {
		return size, nil
	}
	free, err := sfs.FreeSpace(j.dir)
	if err != nil {
		return size, nil // not known: as configured
	}
	// The free-space reserve is not the journal's to take.
	free -= j.space.Min()
	if share := free / journalDiskShare; share < size {
		size = share &^ 4095
		if size < min(j.maxSize, journalMinFileBytes) {
			return 0, fmt.Errorf("%w: %d bytes free in %s, the journal needs 2 x %d and takes at most 1/%d of it",
				errJournalNoRoom, free, j.dir, min(j.maxSize, journalMinFileBytes), journalDiskShare/2)
		}
	}
	return size, nil
}

// createFiles creates both files allocated to size (allocateFile) and
// fsyncs them and the dir; on failure it removes them.
func (j *journal) createFiles(size int64) error {
	var files [2]vfs.File
	err := func() error {
		for i := range files {
			name := journalPath(j.dir, i)
			f, err := j.fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return fmt.Errorf("create journal %s: %w", name, err)
			}
			files[i] = f
			if err := allocateFile(j.fsys, f, size); err != nil {
				return err
			}
		}
		if err := j.fsys.SyncDir(j.dir); err != nil {
			return fmt.Errorf("journal: fsync %s: %w", j.dir, err)
		}
		return nil
	}()
	if err != nil {
		for i, f := range files {
			if f != nil {
				f.Close()
				j.fsys.Remove(journalPath(j.dir, i))
			}
		}
		return err
	}
	j.mu.Lock()
	j.files = files
	j.mu.Unlock()
	return nil
}

// allocateFile reserves size bytes for f (fallocate) and sets its length
// to size, then fsyncs it: ready in milliseconds where zeroFill writes
// the whole file. The blocks are unwritten extents that read as zeros, so
// the file holds no record until one is written; the first pass through
// it costs each round's fdatasync a metadata commit (the extents it
// wrote become written), the passes after it overwrite in place.
func allocateFile(fsys vfs.FS, f vfs.File, size int64) error {
	if err := fsys.Preallocate(f, size); err != nil {
		return fmt.Errorf("preallocate journal %s: %w", f.Name(), err)
	}
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("size journal %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync journal %s: %w", f.Name(), err)
	}
	return nil
}

// removeFiles voids, closes and removes the files that exist (their
// records are no longer needed: replayed at start, checkpointed at
// release) and fsyncs the dir. Voided first, so a removal a power cut
// undoes leaves nothing to replay.
func (j *journal) removeFiles() error {
	removed := false
	for i, f := range j.files {
		if f == nil {
			continue
		}
		if st, err := f.Stat(); err != nil || st.Size() >= jrnlVoidMarker {
			if err := j.void(i, j.gen); err != nil {
				return err
			}
		}
		f.Close()
		j.mu.Lock()
		j.files[i] = nil
		j.mu.Unlock()
		if err := j.fsys.Remove(journalPath(j.dir, i)); err != nil && !errNotExist(err) {
			return fmt.Errorf("remove journal %s: %w", journalPath(j.dir, i), err)
		}
		removed = true
	}
	if removed {
		if err := j.fsys.SyncDir(j.dir); err != nil {
			return fmt.Errorf("journal: fsync %s: %w", j.dir, err)
		}
	}
	return nil
}

// readJournalFile reads file i's records: one generation, up to the first
// record that is torn, zero, corrupt or of another generation.
func readJournalFile(f vfs.File, i int) ([]struct {
	k jkey
	r jrec
}, uint64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	var (
		out []struct {
			k jkey
			r jrec
		}
		gen uint64
		pos int64
	)
	w := &fileWindow{f: f, buf: make([]byte, min(size, journalReadChunk))}
	for pos+jrnlFixedHeader <= size {
		hdr, err := w.at(pos, 8)
		if err != nil {
			return nil, 0, fmt.Errorf("read journal %s: %w", f.Name(), err)
		}
		length := int64(binary.BigEndian.Uint32(hdr))
		sum := binary.BigEndian.Uint32(hdr[4:])
		if length == 0 && pos == 0 {
			// A void marker: no records, only the generation it keeps.
			if g, err := w.at(8, 8); err == nil && len(g) == 8 && crc32.Checksum(g, crcTable) == sum {
				gen = binary.BigEndian.Uint64(g)
			}
			break
		}
		if length < jrnlFixedHeader-4 || pos+4+length > size {
			break
		}
		body, err := w.at(pos+8, int(length-4))
		if err != nil {
			return nil, 0, fmt.Errorf("read journal %s: %w", f.Name(), err)
		}
		if int64(len(body)) != length-4 || crc32.Checksum(body, crcTable) != sum {
			break
		}
		g := binary.BigEndian.Uint64(body)
		if gen == 0 {
			gen = g
		} else if g != gen {
			break
		}
		k, r, ok := parseJrec(body[8:])
		if !ok {
			break
		}
		r.gen, r.file = g, i
		r.pos += pos + 8 + 8
		out = append(out, struct {
			k jkey
			r jrec
		}{k, r})
		pos += 4 + length
	}
	return out, gen, nil
}

// journalReadChunk is how much of a journal file readJournalFile reads
// at once: the records are read in order, so one pread serves many.
const journalReadChunk = 1 << 20

// fileWindow serves in-order reads of a file from one buffer refilled a
// chunk at a time (readJournalFile: one pread per MiB instead of two
// per record, and a round over 1,000 partitions writes 1,000 records).
type fileWindow struct {
	f   vfs.File
	buf []byte
	off int64 // file offset of buf[0]
	n   int   // bytes of buf read
}

// at returns the n bytes at pos, fewer at the end of the file; the slice
// is valid until the next call.
func (w *fileWindow) at(pos int64, n int) ([]byte, error) {
	if pos >= w.off && pos+int64(n) <= w.off+int64(w.n) {
		return w.buf[pos-w.off : pos-w.off+int64(n)], nil
	}
	if n > len(w.buf) {
		w.buf = make([]byte, n)
	}
	m, err := w.f.ReadAt(w.buf, pos)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	w.off, w.n = pos, m
	return w.buf[:min(n, m)], nil
}

// parseJrec decodes a record body after the generation: kind, key and
// placement; r.pos is the payload's position within b.
func parseJrec(b []byte) (jkey, jrec, bool) {
	var k jkey
	var r jrec
	if len(b) < 1+16+4+2 || (b[0] != jrnlKindBatches && b[0] != jrnlKindTruncate) {
		return k, r, false
	}
	r.kind = b[0]
	copy(k.id[:], b[1:17])
	k.partition = int32(binary.BigEndian.Uint32(b[17:]))
	tl := int(binary.BigEndian.Uint16(b[21:]))
	rest := b[23:]
	if len(rest) < tl+16 {
		return k, r, false
	}
	k.topic = string(rest[:tl])
	rest = rest[tl:]
	r.segBase = int64(binary.BigEndian.Uint64(rest))
	r.segPos = int64(binary.BigEndian.Uint64(rest[8:]))
	r.pos = int64(1 + 16 + 4 + 2 + tl + 16)
	r.size = int64(len(rest) - 16)
	return k, r, true
}

// recordSize is the journal bytes of a record of n payload bytes for l.
func recordSize(l *Log, n int64) int64 { return jrnlFixedHeader + int64(len(l.key.topic)) + n }

// appendJrecHeader appends a record's header for n payload bytes of l at
// (segBase, segPos) to buf; the payload must follow, then sealJrec.
func appendJrecHeader(buf []byte, gen uint64, l *Log, segBase, segPos, n int64) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(recordSize(l, n)-4))
	buf = append(buf, 0, 0, 0, 0) // crc, sealed later
	buf = binary.BigEndian.AppendUint64(buf, gen)
	buf = append(buf, jrnlKindBatches)
	buf = append(buf, l.topicID[:]...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(l.key.partition))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(l.key.topic)))
	buf = append(buf, l.key.topic...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(segBase))
	return binary.BigEndian.AppendUint64(buf, uint64(segPos))
}

// sealJrec writes the CRC of the record starting at buf[start:].
func sealJrec(buf []byte, start int) {
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+8:], crcTable))
}

// recordsFor returns (and forgets) the byte records of the log's
// partition that follow its last truncation record, oldest first.
func (j *journal) recordsFor(l *Log) []jrec {
	if j == nil || j.started {
		return nil
	}
	k := jkey{id: l.topicID, topic: l.key.topic, partition: l.key.partition}
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.recs[k]
	delete(j.recs, k)
	for i := len(r) - 1; i >= 0; i-- {
		if r[i].kind == jrnlKindTruncate {
			// Everything before it was fsynced in the segment or cut.
			return r[i+1:]
		}
	}
	return r
}

// writeTruncate journals (and fsyncs) that l is about to be cut: records
// of the partition written before it are never replayed (TruncateTo fsyncs
// the log first, so they are durable in the segment or about to be cut).
// The caller holds the syncer's round lock, so no round writes meanwhile,
// and has made room with reserve.
func (j *journal) writeTruncate(l *Log, offset int64) error {
	buf := appendJrecHeader(nil, j.gen, l, -1, offset, 0)
	buf[16] = jrnlKindTruncate
	sealJrec(buf, 0)
	return j.write(buf, 0, nil)
}

// truncRecordSize is the journal bytes of l's truncation record.
func truncRecordSize(l *Log) int64 { return recordSize(l, 0) }

// payload reads a record's bytes.
func (j *journal) payload(r jrec) ([]byte, error) {
	buf := make([]byte, r.size)
	if _, err := j.files[r.file].ReadAt(buf, r.pos); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read journal %s: %w", j.files[r.file].Name(), err)
	}
	return buf, nil
}

// start ends recovery: every log of the dir is open and replayed what it
// needed, so the files found at open are voided and removed, and rounds
// may use the journal (once a round creates its files) from the next
// generation on.
func (j *journal) start() error {
	j.mu.Lock()
	j.recs = nil
	j.ready = false
	j.mu.Unlock()
	if err := j.removeFiles(); err != nil {
		return err
	}
	j.gen++
	j.cur, j.pos = 0, 0
	j.started = true
	return nil
}

// void overwrites the first record of file i with a void marker and
// fsyncs it: nothing in the file is read at the next open. The marker
// keeps gen (at least the generation of every record the file held), so
// that the generations of a later run stay above those of the stale
// records left behind the marker: a file's reader stops at the first
// record of another generation, and must never take a stale record for
// one of the current generation (a stale truncation record would void
// newer records of its partition).
//
// Marker layout: length u32 = 0, crc u32 (CRC-32C of the generation),
// generation u64.
func (j *journal) void(i int, gen uint64) error {
	var marker [jrnlVoidMarker]byte
	binary.BigEndian.PutUint64(marker[8:], gen)
	binary.BigEndian.PutUint32(marker[4:], crc32.Checksum(marker[8:], crcTable))
	f := j.files[i]
	if f == nil {
		return nil // not created: nothing to void
	}
	if _, err := f.WriteAt(marker[:], 0); err != nil {
		return fmt.Errorf("void journal %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync journal %s: %w", f.Name(), err)
	}
	return nil
}

// reserve makes room for a round of n bytes, switching files (and
// starting the full one's checkpoint) when the current one is full; the
// first call after a start or a release creates the files (prepare). It
// reports false when the journal cannot take the round: not started,
// failed, its files not created (no room: retried after journalRetry),
// the round larger than a file, or the other file still being
// checkpointed. The caller holds the syncer's round lock.
func (j *journal) reserve(n int64) bool {
	if !j.started {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed != nil {
		return false
	}
	if !j.ready {
		if j.now().Before(j.retryAt) {
			return false
		}
		j.mu.Unlock()
		j.prepare()
		j.mu.Lock()
		if !j.ready {
			return false
		}
	}
	if n > j.fileSize {
		return false
	}
	if j.pos+n <= j.fileSize {
		return true
	}
	other := 1 - j.cur
	if j.busy[other] {
		j.stats.Fallbacks++
		return false
	}
	full := j.cur
	logs := j.covered[full]
	j.covered[full] = nil
	j.busy[full] = true
	j.cur, j.pos = other, 0
	j.gen++
	j.ckpts.Add(1)
	go j.checkpoint(full, j.gen-1, logs) // owner: the journal; waited for by wait
	return true
}

// write appends the round (records of generation j.gen built by the
// caller) at the current position and fsyncs the file; logs are the
// round's logs and the marks their records reach.
func (j *journal) write(round []byte, records int, logs []jmark) error {
	if err := j.writePart(round, 0); err != nil {
		return err
	}
	return j.commit(int64(len(round)), records, logs)
}

// writePart writes part of a round (records built by the caller) at off
// bytes past the round's start, without fsync; commit ends the round. A
// round built and written in parts needs no buffer of its whole size.
func (j *journal) writePart(part []byte, off int64) error {
	f := j.files[j.cur]
	if _, err := f.WriteAt(part, j.pos+off); err != nil {
		return j.fail(fmt.Errorf("write journal %s: %w", f.Name(), err))
	}
	return nil
}

// commit fsyncs the round of n bytes written with writePart; logs are the
// round's logs and the marks their records reach.
func (j *journal) commit(n int64, records int, logs []jmark) error {
	f := j.files[j.cur]
	if err := f.Sync(); err != nil {
		return j.fail(fmt.Errorf("fsync journal %s: %w", f.Name(), err))
	}
	j.pos += n
	j.lastUsed = j.now()
	j.mu.Lock()
	c := j.covered[j.cur]
	if c == nil {
		c = jlogs{}
		j.covered[j.cur] = c
	}
	for _, m := range logs {
		if old, ok := c[m.l]; !ok || m.cuts != old.cuts || m.mark.leo > old.mark.leo {
			c[m.l] = jreach{m.mark, m.cuts}
		}
	}
	j.stats.Rounds++
	j.stats.Records += uint64(records)
	j.stats.Bytes += uint64(n)
	j.mu.Unlock()
	return nil
}

// jmark is a log and the mark its journaled bytes reach.
type jmark struct {
	l    *Log
	mark writeMark
	cuts uint64 // l.cuts when prepared
}

// isReady reports whether the files are prepared (rounds may use them).
func (j *journal) isReady() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ready
}

// err is the journal's failure, nil while it works.
func (j *journal) err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

func (j *journal) fail(err error) error {
	j.mu.Lock()
	if j.failed == nil {
		j.failed = err
		j.logger.Error("journal failed; fsyncing segments directly from now on", "dir", j.dir, "err", err)
	}
	j.mu.Unlock()
	return err
}

// checkpoint makes every segment byte that file i covered durable with
// one SyncFS, moves the logs' flushed marks past them, and voids the file.
func (j *journal) checkpoint(i int, gen uint64, logs jlogs) {
	defer j.ckpts.Done()
	err := j.flushCovered(logs)
	if err == nil {
		err = j.void(i, gen)
	}
	j.mu.Lock()
	j.busy[i] = false
	if err == nil {
		j.stats.Checkpoints++
	}
	j.mu.Unlock()
	if err != nil {
		j.fail(err)
		return
	}
	if j.checkpointed != nil {
		j.checkpointed()
	}
}

// flushCovered runs one SyncFS and marks the logs flushed to their marks;
// a failed SyncFS fails the logs (their journaled bytes may not be in
// their segments).
func (j *journal) flushCovered(logs jlogs) error {
	if len(logs) == 0 {
		return nil
	}
	if err := j.syncFS.Sync(); err != nil {
		err = fmt.Errorf("journal checkpoint: syncfs of %s: %w", j.dir, err)
		for l := range logs {
			l.failFlush(err)
		}
		return err
	}
	for l, r := range logs {
		l.markFlushed(r.mark, r.cuts)
	}
	return nil
}

// barrier makes every journaled byte durable in its segment and voids
// both files (the caller holds the syncer's round lock, or the syncer is
// closing): afterwards no record written so far can be replayed.
func (j *journal) barrier() error {
	if j == nil || !j.started {
		return nil
	}
	j.ckpts.Wait()
	j.mu.Lock()
	logs := jlogs{}
	for i := range j.covered {
		for l, r := range j.covered[i] {
			if old, ok := logs[l]; !ok || r.cuts > old.cuts || (r.cuts == old.cuts && r.mark.leo > old.mark.leo) {
				logs[l] = r
			}
		}
		j.covered[i] = nil
	}
	j.mu.Unlock()
	if err := j.flushCovered(logs); err != nil {
		return err
	}
	for i := range j.files {
		if err := j.void(i, j.gen); err != nil {
			return j.fail(err)
		}
	}
	j.gen++
	j.pos = 0
	return nil
}

// releaseIfIdle removes the files when no round wrote them for
// journalIdleRelease (the caller holds the syncer's round lock): every
// journaled byte is made durable in its segment first (barrier). The next
// round over many partitions creates them again.
func (j *journal) releaseIfIdle(now time.Time) error {
	j.mu.Lock()
	idle := j.started && j.ready && now.Sub(j.lastUsed) >= journalIdleRelease
	j.mu.Unlock()
	if !idle {
		return nil
	}
	return j.release("idle")
}

// release makes every journaled byte durable in its segment and removes
// the files (the caller holds the syncer's round lock, or the syncer is
// closing: why says which).
func (j *journal) release(why string) error {
	if err := j.barrier(); err != nil {
		return err
	}
	j.mu.Lock()
	had := j.files[0] != nil || j.files[1] != nil
	j.ready = false
	j.fileSize = 0
	j.mu.Unlock()
	if !had {
		return nil
	}
	j.cur, j.pos = 0, 0
	if err := j.removeFiles(); err != nil {
		return j.fail(err)
	}
	j.mu.Lock()
	j.stats.Released++
	j.stats.FileBytes = 0
	j.mu.Unlock()
	j.logger.Info("write-ahead journal files removed", "dir", j.dir, "why", why)
	return nil
}

// wait waits for the running checkpoints.
func (j *journal) wait() { j.ckpts.Wait() }

// Stats returns the counters.
func (j *journal) Stats() JournalStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stats
}

func (j *journal) close() {
	for i, f := range j.files {
		if f != nil {
			f.Close()
			j.files[i] = nil
		}
	}
	if j.syncFS != nil {
		j.syncFS.Close()
		j.syncFS = nil
	}
}

// replayJournal writes into the log's segments the journaled bytes past
// leo (the end the segments kept), in journal order, starting with the
// batch at leo; it stops at a gap (bytes never journaled were never
// acknowledged) or at anything that does not continue the log, and
// reports whether it wrote. The caller runs recovery over what it wrote
// (checks, indexes, fsync), so a record's bytes are trusted no more than
// any bytes past the recovery point.
func (l *Log) replayJournal(recs []jrec, leo int64) (bool, error) {
	j := l.syncer.journalFor(l)
	last := l.segs[len(l.segs)-1]
	open := func(s *segment) (vfs.File, int64, error) {
		f, err := l.fsys.OpenFile(s.path(LogSuffix), os.O_RDWR, 0)
		if err != nil {
			return nil, 0, fmt.Errorf("replay journal into segment %d: %w", s.base, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, st.Size(), nil
	}
	f, size, err := open(last)
	if err != nil {
		return false, err
	}
	defer func() { f.Close() }()
	wrote, n := false, 0
	stop := func(why string, args ...any) {
		l.logger.Warn("journal replay stops: "+why, append(args, "log_end", leo)...)
	}
replay:
	for _, r := range recs {
		if r.kind != jrnlKindBatches {
			continue
		}
		data, err := j.payload(r)
		if err != nil {
			return wrote, err
		}
		used := false
		for len(data) > 0 {
			b, rest, err := record.Next(data)
			if err != nil {
				stop("unreadable journaled batch", "err", err)
				break replay
			}
			data = rest
			if b.LastOffset() < leo {
				continue // the segment kept it
			}
			if b.BaseOffset() != leo {
				stop("journaled bytes do not continue the log", "batch", b.BaseOffset())
				break replay
			}
			switch {
			case r.segBase > last.base && r.segBase == leo:
				// The log rolled here: the new segment's bytes go to it.
				ns := l.newSegment(leo)
				if err := l.createSegmentFiles(ns, false); err != nil {
					return wrote, err
				}
				l.segs = append(l.segs, ns)
				f.Close()
				last = ns
				if f, size, err = open(last); err != nil {
					return wrote, err
				}
			case r.segBase != last.base:
				stop("journaled bytes belong to another segment", "segment", r.segBase, "last_segment", last.base)
				break replay
			}
			if _, err := f.WriteAt(b, size); err != nil {
				return wrote, fmt.Errorf("replay journal into segment %d: %w", last.base, err)
			}
			size += int64(len(b))
			leo = b.LastOffset() + 1
			wrote, used = true, true
		}
		if used {
			n++
		}
	}
	if n > 0 {
		j.mu.Lock()
		j.stats.Replayed += uint64(n)
		j.mu.Unlock()
		l.logger.Info("replayed journaled records into the log", "records", n, "log_end", leo)
	}
	return wrote, nil
}
