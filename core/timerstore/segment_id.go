package timerstore

import (
	"crypto/sha1"
	"strconv"
)

// urlNamespace is the RFC 4122 URL namespace (6ba7b811-9dad-11d1-80b4-00c04fd430c8).
var urlNamespace = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// segmentName is the segment's stored name and the input of its id.
func segmentName(group, topic string, partition int32) string {
	return group + ":" + topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// SegmentID returns UUIDv5(URL namespace, "{group}:{topic}/{partition}"),
// the id the original gives the timer segment of a partition. It must not
// change, or timers stored by earlier runs (of either implementation) would
// be orphaned.
func SegmentID(group, topic string, partition int32) [16]byte {
	return UUIDv5(urlNamespace, segmentName(group, topic, partition))
}

// UUIDv5 is the RFC 4122 name-based (SHA-1) UUID of name in namespace,
// the form of the original's segment ids (the defer store's too).
func UUIDv5(namespace [16]byte, name string) [16]byte {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write([]byte(name))
	var id [16]byte
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x50 // version 5
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}
