package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/sasl"
	"github.com/strata-io/strata/internal/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// scramVersion is the version of the SCRAM credential file format.
const scramVersion = 1

// scramFile is the durable SCRAM credential store
// (<first log dir>/__strata_scram_credentials.json, mode 0600): per user
// and mechanism the salt, iterations, StoredKey and ServerKey (never a
// password), as Kafka keeps them in its metadata log.
type scramFile struct {
	Version int                                   `json:"version"`
	Users   map[string]map[string]scramCredential `json:"users"`
}

// scramCredential is one stored credential (byte fields base64 in JSON).
type scramCredential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// scramStore holds the credentials in memory over the file.
type scramStore struct {
	mu    sync.RWMutex
	fsys  vfs.FS
	path  string
	users map[string]map[string]scramCredential
	// remote, when set, is the store instead of the file.
	remote ScramRemote
}

// loadScram reads the credential file of dir; a missing file is empty.
func loadScram(fsys vfs.FS, dir string) (*scramStore, error) {
	st := &scramStore{fsys: fsys, path: filepath.Join(dir, scramFileName), users: map[string]map[string]scramCredential{}}
	b, err := vfs.ReadFile(fsys, st.path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read SCRAM credentials: %w", err)
	}
	var f scramFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse SCRAM credentials %s: %w", st.path, err)
	}
	if f.Version != scramVersion {
		return nil, fmt.Errorf("SCRAM credentials %s: unsupported version %d", st.path, f.Version)
	}
	if f.Users != nil {
		st.users = f.Users
	}
	return st, nil
}

// ScramUpsertion creates or replaces one user's credential for one
// mechanism (AlterUserScramCredentials upsertion; SaltedPassword is
// Hi(password, salt, iterations)).
type ScramUpsertion struct {
	User, Mechanism string
	Iterations      int
	Salt            []byte
	SaltedPassword  []byte
}

// ScramDeletion removes one user's credential for one mechanism.
type ScramDeletion struct {
	User, Mechanism string
}

// ScramInfo is what DescribeUserScramCredentials shows of a credential.
type ScramInfo struct {
	Mechanism  string
	Iterations int
}

// ScramRemote keeps the SCRAM credentials somewhere other than the local
// file: the cluster metadata (server implements it over meta), so that a
// user created through any broker authenticates on every broker.
type ScramRemote interface {
	// Lookup returns user's credential for a mechanism.
	Lookup(mechanism, user string) (sasl.ScramCredential, bool)
	// Load returns every user's credentials and the version of each user
	// read (the compare of Store).
	Load() (users map[string]map[string]sasl.ScramCredential, versions map[string]int64)
	// Store replaces the credentials of the users in changed (none left:
	// the user is removed), each compared with versions; an error wrapping
	// ErrScramConflict means another broker changed one meanwhile.
	Store(changed map[string]map[string]sasl.ScramCredential, versions map[string]int64) error
}

// ErrScramConflict is ScramRemote.Store's answer when a user's
// credentials changed since they were loaded.
var ErrScramConflict = errors.New("SCRAM credentials changed concurrently")

// SetScramRemote moves the SCRAM credentials to r: lookups, descriptions
// and alterations use it, the local file no longer (its users were
// adopted into r by the caller).
func (b *Broker) SetScramRemote(r ScramRemote) {
	b.scram.mu.Lock()
	b.scram.remote = r
	b.scram.mu.Unlock()
}

// ForgetLocalScramUsers removes users from the local credential file once
// they live in the ScramRemote (adopted, or there already): adoption is a
// move, as the records of Kafka's `kafka-storage format --add-scram` are
// applied once. Left in the file, a user deleted through the cluster
// would be adopted again at the next start, its password working again.
func (b *Broker) ForgetLocalScramUsers(users []string) error {
	st := b.scram
	st.mu.Lock()
	defer st.mu.Unlock()
	next := make(map[string]map[string]scramCredential, len(st.users))
	for u, mechs := range st.users {
		next[u] = mechs
	}
	for _, u := range users {
		delete(next, u)
	}
	if len(next) == len(st.users) {
		return nil
	}
	if err := st.write(next); err != nil {
		return fmt.Errorf("remove the SCRAM users adopted into the cluster metadata from %s: %w", st.path, err)
	}
	st.users = next
	return nil
}

// LocalScramUsers returns the credentials of the local file (for adoption
// into a ScramRemote).
func (b *Broker) LocalScramUsers() map[string]map[string]sasl.ScramCredential {
	b.scram.mu.RLock()
	defer b.scram.mu.RUnlock()
	out := make(map[string]map[string]sasl.ScramCredential, len(b.scram.users))
	for u, mechs := range b.scram.users {
		out[u] = make(map[string]sasl.ScramCredential, len(mechs))
		for m, c := range mechs {
			out[u][m] = sasl.ScramCredential(c.cred())
		}
	}
	return out
}

// cred is c as sasl's type.
func (c scramCredential) cred() sasl.ScramCredential {
	return sasl.ScramCredential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
}

// ScramCredential returns user's credential for a SCRAM mechanism.
func (b *Broker) ScramCredential(mechanism, user string) (sasl.ScramCredential, bool) {
	if r := b.scram.remoteStore(); r != nil {
		return r.Lookup(mechanism, user)
	}
	b.scram.mu.RLock()
	defer b.scram.mu.RUnlock()
	c, ok := b.scram.users[user][mechanism]
	if !ok {
		return sasl.ScramCredential{}, false
	}
	return sasl.ScramCredential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, true
}

// DescribeScram returns every user's credentials, mechanisms sorted.
func (b *Broker) DescribeScram() map[string][]ScramInfo {
	users := b.scram.users
	if r := b.scram.remoteStore(); r != nil {
		all, _ := r.Load()
		users = fromSasl(all)
	} else {
		b.scram.mu.RLock()
		defer b.scram.mu.RUnlock()
	}
	out := make(map[string][]ScramInfo, len(users))
	for u, mechs := range users {
		for m, c := range mechs {
			out[u] = append(out[u], ScramInfo{Mechanism: m, Iterations: c.Iterations})
		}
		sort.Slice(out[u], func(i, j int) bool { return out[u][i].Mechanism < out[u][j].Mechanism })
	}
	return out
}

// AlterScram applies AlterUserScramCredentials with Kafka's rules and
// returns each named user's outcome (nil = applied). A user whose
// alterations include an invalid one (unknown mechanism, iterations out
// of [4096, 16384], empty name or salt, the same mechanism twice,
// deleting a missing credential) gets that error and none of their
// alterations are applied; the others are applied and written to disk
// (tmp + fsync + rename) before AlterScram returns. A write failure is
// returned for every user of the request.
func (b *Broker) AlterScram(dels []ScramDeletion, ups []ScramUpsertion) map[string]error {
	if r := b.scram.remoteStore(); r != nil {
		return alterRemote(r, dels, ups)
	}
	results, err := b.scram.alter(dels, ups)
	if err != nil {
		b.logger.Error("persist SCRAM credentials", "err", err)
	}
	return results
}

// AlterScramOffline applies AlterScram's changes to the credential store
// of a stopped broker (the first of cfg's log.dirs), as Kafka's
// `kafka-storage format --add-scram` bootstraps the first SCRAM users of a
// listener that accepts nothing else. It takes the log dir's lock, so it
// fails while a broker runs there.
func AlterScramOffline(cfg *config.Broker, dels []ScramDeletion, ups []ScramUpsertion) (map[string]error, error) {
	first := ""
	for _, d := range strings.Split(cfg.Get("log.dirs"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			first = d
			break
		}
	}
	if first == "" {
		return nil, fmt.Errorf("log.dirs is empty")
	}
	abs, err := filepath.Abs(first)
	if err != nil {
		return nil, fmt.Errorf("log dir %s: %w", first, err)
	}
	fsys := vfs.Default()
	d, err := lockDir(fsys, abs)
	if err != nil {
		return nil, err
	}
	defer d.unlock()
	st, err := loadScram(fsys, abs)
	if err != nil {
		return nil, err
	}
	return st.alter(dels, ups)
}

// alter is AlterScram over the store; a write failure is also returned.
func (st *scramStore) alter(dels []ScramDeletion, ups []ScramUpsertion) (map[string]error, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	results, next := plan(st.users, dels, ups)
	if err := st.write(next); err != nil {
		// A failed write may have replaced the file all the same (the
		// rename done, the directory fsync failed): put the old
		// credentials back so the file keeps what the callers are told.
		if rerr := st.write(st.users); rerr != nil {
			err = fmt.Errorf("%w (restoring the previous credentials: %v)", err, rerr)
		}
		for u := range results {
			if results[u] == nil {
				results[u] = fmt.Errorf("persist SCRAM credentials: %v: %w", err, kerr.KafkaStorageError)
			}
		}
		return results, err
	}
	st.users = next
	return results, nil
}

// remoteStore returns the remote store, nil when the file is the store.
func (st *scramStore) remoteStore() ScramRemote {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.remote
}

// fromSasl converts credentials to the stored form.
func fromSasl(users map[string]map[string]sasl.ScramCredential) map[string]map[string]scramCredential {
	out := make(map[string]map[string]scramCredential, len(users))
	for u, mechs := range users {
		out[u] = make(map[string]scramCredential, len(mechs))
		for m, c := range mechs {
			out[u][m] = scramCredential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
		}
	}
	return out
}

// alterRemote is AlterScram over a remote store: the alterations are
// planned on the credentials read and written compared with them, again
// from a fresh read when another broker changed a user meanwhile.
func alterRemote(r ScramRemote, dels []ScramDeletion, ups []ScramUpsertion) map[string]error {
	var err error
	for range 20 {
		users, versions := r.Load()
		base := fromSasl(users)
		results, next := plan(base, dels, ups)
		changed := map[string]map[string]sasl.ScramCredential{}
		for u, res := range results {
			if res != nil {
				continue
			}
			changed[u] = map[string]sasl.ScramCredential{}
			for m, c := range next[u] {
				changed[u][m] = c.cred()
			}
		}
		if len(changed) == 0 {
			return results
		}
		if err = r.Store(changed, versions); err == nil {
			return results
		}
		if !errors.Is(err, ErrScramConflict) {
			break
		}
	}
	out := map[string]error{}
	for _, d := range dels {
		out[d.User] = fmt.Errorf("store SCRAM credentials in the cluster metadata: %v: %w", err, kerr.RequestTimedOut)
	}
	for _, u := range ups {
		out[u.User] = fmt.Errorf("store SCRAM credentials in the cluster metadata: %v: %w", err, kerr.RequestTimedOut)
	}
	return out
}

// plan applies AlterScram's rules to base: each named user's outcome (nil
// = applied) and the credentials after the applied alterations.
func plan(base map[string]map[string]scramCredential, dels []ScramDeletion, ups []ScramUpsertion) (map[string]error, map[string]map[string]scramCredential) {
	results := map[string]error{}
	fail := func(user string, err error) {
		if results[user] == nil {
			results[user] = err
		}
	}
	pairs := map[[2]string]int{}
	for _, d := range dels {
		pairs[[2]string{d.User, d.Mechanism}]++
	}
	for _, u := range ups {
		pairs[[2]string{u.User, u.Mechanism}]++
	}
	for p, n := range pairs { // duplicates first, as Kafka
		if _, ok := results[p[0]]; !ok {
			results[p[0]] = nil
		}
		if n > 1 {
			fail(p[0], fmt.Errorf("A user credential cannot be altered twice in the same request: %w", kerr.DuplicateResource))
		}
	}
	check := func(user, mech string) {
		switch {
		case user == "":
			fail(user, fmt.Errorf("Username must not be empty: %w", kerr.UnacceptableCredential))
		case !sasl.IsScram(mech):
			fail(user, fmt.Errorf("Unknown SCRAM mechanism: %w", kerr.UnsupportedSaslMechanism))
		}
	}
	for _, d := range dels {
		check(d.User, d.Mechanism)
		if _, ok := base[d.User][d.Mechanism]; !ok && sasl.IsScram(d.Mechanism) {
			fail(d.User, fmt.Errorf("Attempt to delete a user credential that does not exist: %w", kerr.ResourceNotFound))
		}
	}
	for _, u := range ups {
		check(u.User, u.Mechanism)
		switch {
		case u.Iterations < sasl.MinIteration:
			fail(u.User, fmt.Errorf("Too few iterations: %w", kerr.UnacceptableCredential))
		case u.Iterations > sasl.MaxIteration:
			fail(u.User, fmt.Errorf("Too many iterations: %w", kerr.UnacceptableCredential))
		case len(u.Salt) == 0:
			fail(u.User, fmt.Errorf("Salt must not be empty: %w", kerr.UnacceptableCredential))
		case len(u.SaltedPassword) == 0:
			fail(u.User, fmt.Errorf("Salted password must not be empty: %w", kerr.UnacceptableCredential))
		}
	}
	next := make(map[string]map[string]scramCredential, len(base))
	for u, mechs := range base {
		next[u] = make(map[string]scramCredential, len(mechs))
		for m, c := range mechs {
			next[u][m] = c
		}
	}
	for _, d := range dels {
		if results[d.User] == nil {
			delete(next[d.User], d.Mechanism)
			if len(next[d.User]) == 0 {
				delete(next, d.User)
			}
		}
	}
	for _, u := range ups {
		if results[u.User] != nil {
			continue
		}
		c, err := sasl.NewScramCredential(u.Mechanism, u.SaltedPassword, u.Salt, u.Iterations)
		if err != nil { // mechanism checked above
			fail(u.User, fmt.Errorf("%v: %w", err, kerr.UnsupportedSaslMechanism))
			continue
		}
		if next[u.User] == nil {
			next[u.User] = map[string]scramCredential{}
		}
		next[u.User][u.Mechanism] = scramCredential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
	}
	return results, next
}

// write replaces the credential file with users (mode 0600).
func (st *scramStore) write(users map[string]map[string]scramCredential) error {
	data, err := json.MarshalIndent(scramFile{Version: scramVersion, Users: users}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode SCRAM credentials: %w", err)
	}
	return vfs.WriteFileAtomic(st.fsys, st.path, data, 0o600)
}
