package record

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ControlType is the type in a control record's key (Kafka's ControlRecordType).
type ControlType int16

// Control record types.
const (
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlLeaderChange   ControlType = 2
	ControlSnapshotHeader ControlType = 3
	ControlSnapshotFooter ControlType = 4
	ControlKRaftVersion   ControlType = 5
	ControlKRaftVoters    ControlType = 6
)

// String names the type as Kafka does (ABORT, COMMIT, ...).
func (t ControlType) String() string {
	names := [...]string{"ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER", "KRAFT_VERSION", "KRAFT_VOTERS"}
	if t >= 0 && int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(t))
}

// ParseControlKey decodes a control record key: version int16 (0), type int16.
func ParseControlKey(key []byte) (ControlType, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("record: control key of %d bytes, want 4: %w", len(key), kerr.CorruptMessage)
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != 0 {
		return 0, fmt.Errorf("record: control key version %d, want 0: %w", v, kerr.CorruptMessage)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}

// ParseEndTxnMarker decodes the value of a COMMIT/ABORT control record:
// version int16 (0), coordinatorEpoch int32.
func ParseEndTxnMarker(value []byte) (coordinatorEpoch int32, err error) {
	if len(value) < 6 {
		return 0, fmt.Errorf("record: end txn marker of %d bytes, want 6: %w", len(value), kerr.CorruptMessage)
	}
	if v := int16(binary.BigEndian.Uint16(value)); v != 0 {
		return 0, fmt.Errorf("record: end txn marker version %d, want 0: %w", v, kerr.CorruptMessage)
	}
	return int32(binary.BigEndian.Uint32(value[2:])), nil
}

// EndTxnMarker returns the single record of a transaction marker batch
// (COMMIT or ABORT) for Build with AttrControl|AttrTransactional.
func EndTxnMarker(t ControlType, coordinatorEpoch int32) Record {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(t))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	return Record{Key: key, Value: value}
}
