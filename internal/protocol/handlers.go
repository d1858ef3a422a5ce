package protocol

// buildHandlers lists every API key this broker serves with the exact
// version range its handler implements. ApiVersions advertises this table
// (plus the group coordinator's keys when one is wired).
func (s *Server) buildHandlers() map[int16]handler {
	h := map[int16]handler{
		0:  {0, 11, s.handleProduce},    // v0-2 for librdkafka <= 2.11, which enables gzip/snappy/lz4 only if v0 is served
		1:  {4, 15, s.handleFetch},      // v13+ topic ids (KIP-516), v15 ReplicaState (KIP-903)
		2:  {0, 7, s.handleListOffsets}, // v0 for Burrow 1.2.1 (sarama OffsetRequest v0 for end offsets)
		3:  {0, 12, s.handleMetadata},
		18: {0, 4, s.handleApiVersions},
		19: {2, 7, s.handleCreateTopics},
		20: {1, 6, s.handleDeleteTopics},
		21: {0, 2, s.handleDeleteRecords},
		22: {0, 4, s.handleInitProducerID},
		23: {2, 4, s.handleOffsetForLeaderEpoch},
		29: {0, 3, s.handleDescribeACLs}, // SECURITY_DISABLED without an authorizer, as Kafka
		30: {0, 3, s.handleCreateACLs},
		31: {0, 3, s.handleDeleteACLs},
		32: {1, 4, s.handleDescribeConfigs},
		33: {0, 2, s.handleAlterConfigs},
		35: {1, 4, s.handleDescribeLogDirs},
		37: {0, 3, s.handleCreatePartitions},
		43: {0, 2, s.handleElectLeaders}, // one node: nothing to elect or move
		45: {0, 1, s.handleAlterPartitionReassignments},
		46: {0, 0, s.handleListPartitionReassignments},
		44: {0, 1, s.handleIncrementalAlterConfigs},
		60: {0, 1, s.handleDescribeCluster},
		61: {0, 0, s.handleDescribeProducers},
		50: {0, 0, s.handleDescribeUserScramCredentials}, // any listener, as Kafka without an authorizer
		51: {0, 0, s.handleAlterUserScramCredentials},
	}
	if s.cfg.Cluster != nil {
		h[64] = handler{0, 0, s.handleUnregisterBroker} // KIP-631: a cluster's registrations
	}
	if s.cfg.Quotas != nil && s.cfg.Security != nil { // quotas stored in the cluster metadata
		h[48] = handler{0, 1, s.handleDescribeClientQuotas}
		h[49] = handler{0, 1, s.handleAlterClientQuotas}
	}
	if s.anySASL() { // served on SASL listeners only (conn.supported)
		h[17] = handler{0, 1, s.handleSaslHandshake} // v0: unframed tokens follow (librdkafka needs v0 advertised)
		h[36] = handler{0, 2, s.handleSaslAuthenticate}
	}
	if t := s.cfg.Txn; t != nil {
		for key, vr := range t.APIVersions() {
			if _, taken := h[key]; taken {
				continue
			}
			h[key] = handler{vr[0], vr[1], s.handleTxn}
		}
	}
	if s.cfg.TxnMarkers != nil {
		h[27] = handler{0, 1, s.handleWriteTxnMarkers}
	}
	if g := s.cfg.Group; g != nil {
		for key, vr := range g.APIVersions() {
			if _, taken := h[key]; taken {
				continue
			}
			h[key] = handler{vr[0], vr[1], s.handleGroup}
		}
	}
	return s.guard(h) // Kafka's authorization of each API (guards.go)
}

// anySASL reports whether some listener of the configuration is SASL.
func (s *Server) anySASL() bool {
	if len(s.cfg.SASLMechanisms) > 0 {
		return true
	}
	for _, l := range s.cfg.Listeners {
		if len(l.SASLMechanisms) > 0 {
			return true
		}
	}
	return false
}
