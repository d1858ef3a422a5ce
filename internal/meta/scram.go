package meta

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// SCRAM credentials live in the cluster metadata, one key per user
// (Kafka's UserScramCredentialRecord, one per user and mechanism, in its
// metadata log), so a user created through any broker authenticates on
// every broker, and a broker that was down reads the changes it missed:
//
//	<p>/scram/<url-escaped user>   {mechanism: credential} (JSON)

// ScramCredential is one user's stored credential for one mechanism:
// never a password (RFC 5802's StoredKey and ServerKey).
type ScramCredential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// ScramUser is one user's credentials by mechanism, with the mod revision
// of its key (the compare of a change).
type ScramUser struct {
	Creds       map[string]ScramCredential
	ModRevision int64
}

// ScramUsers is the prefix of every user's credentials.
func (k Keys) ScramUsers() string { return k.Prefix + "/scram/" }

// ScramUser is the key of user's credentials.
func (k Keys) ScramUser(user string) string { return k.ScramUsers() + url.PathEscape(user) }

// parseScramUser returns the user a credentials key names.
func parseScramUser(rest string) (string, error) {
	u, err := url.PathUnescape(rest)
	if err != nil || strings.Contains(rest, "/") {
		return "", fmt.Errorf("bad SCRAM credentials key %q", rest)
	}
	return u, nil
}

// applyScram applies one credentials key event to the view's map (copied).
func (nv *View) applyScram(user string, value []byte, modRev int64) error {
	if value == nil {
		delete(nv.Scram, user)
		return nil
	}
	var creds map[string]ScramCredential
	if err := json.Unmarshal(value, &creds); err != nil {
		return fmt.Errorf("SCRAM credentials of %q: %w", user, err)
	}
	nv.Scram[user] = ScramUser{Creds: creds, ModRevision: modRev}
	return nil
}

// ScramChange is the new credentials of one user (none: the user has no
// credential left), compared with the mod revision read (0: absent).
type ScramChange struct {
	User   string
	Creds  map[string]ScramCredential
	Expect int64
}

// PutScram writes users' credentials in one transaction, each compared
// with the revision it was read at: ErrConflict when another broker
// changed one of them meanwhile (the caller reads again and retries). It
// returns the transaction's revision.
func (s *Store) PutScram(ctx context.Context, changes []ScramChange) (int64, error) {
	var out []Change
	for _, c := range changes {
		k := s.keys.ScramUser(c.User)
		if len(c.Creds) == 0 {
			if c.Expect == 0 {
				continue // removing what is not there
			}
			out = append(out, Change{Key: k, Delete: true, Expect: c.Expect})
			continue
		}
		ch, err := PutJSON(k, c.Creds, c.Expect)
		if err != nil {
			return 0, err
		}
		out = append(out, ch)
	}
	if len(out) == 0 {
		return 0, nil
	}
	return s.Txn(ctx, out)
}
