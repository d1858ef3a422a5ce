package server

import "context"

// RevokeSession revokes the broker's current session lease in the
// metadata store, as its expiry would (tests of re-registration).
func RevokeSession(ctx context.Context, s *Server) error {
	_, err := s.cluster.cli.Revoke(ctx, s.cluster.session().Lease())
	return err
}

// BrokerEpoch is the broker's current epoch (KIP-903): the create revision
// of its registration.
func BrokerEpoch(s *Server) int64 { return s.cluster.epoch() }
