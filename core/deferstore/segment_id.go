package deferstore

import (
	"strconv"

	"github.com/prosody-events/prosody-go/core/timerstore"
)

// oidNamespace is the RFC 4122 OID namespace (6ba7b812-9dad-11d1-80b4-00c04fd430c8).
var oidNamespace = [16]byte{0x6b, 0xa7, 0xb8, 0x12, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// segmentName is the input of the segment id. It differs from the timer
// segment's name (order and namespace both), as in the original.
func segmentName(group, topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + ":" + group
}

// SegmentID returns UUIDv5(OID namespace, "{topic}/{partition}:{group}"),
// the id the original gives the defer segment of a partition. It must not
// change, or entries deferred by earlier runs (of either implementation)
// would never be retried.
func SegmentID(group, topic string, partition int32) [16]byte {
	return timerstore.UUIDv5(oidNamespace, segmentName(group, topic, partition))
}
