package dedup

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"

	"github.com/prosody-events/prosody-go/core/event"
)

// ID is a message's deduplication id, a UUID (version nibble 8, RFC 4122
// variant) made from an XXH3-128 digest. Its layout is the original's, so
// that instances of both share one deduplication table.
type ID [16]byte

// MessageID is msg's id for the consumer group under the idempotence
// version (core-behavior.md §4.3). The digest is one stream over
//
//	u32 len(version) ‖ version ‖ u32 len(group) ‖ group ‖
//	u32 len(topic) ‖ topic ‖ i32 partition ‖ u32 len(key) ‖ key ‖
//	(u8 1 ‖ u32 len(id) ‖ id   when the payload has an event id,
//	 u8 0 ‖ i64 offset         otherwise)
//
// every integer little-endian; the length prefixes keep ("ab","c") and
// ("a","bc") apart.
func MessageID(version, group string, msg *event.Message) ID {
	// Typical inputs fit on the stack; longer ones spill to the heap.
	var stack [256]byte
	buf := appendField(stack[:0], version)
	buf = appendField(buf, group)
	buf = appendField(buf, msg.Topic)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(msg.Partition))
	buf = appendField(buf, msg.Key)
	if msg.HasID {
		buf = append(buf, 1)
		buf = appendField(buf, msg.ID)
	} else {
		buf = append(buf, 0)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(msg.Offset))
	}
	return fromDigest(xxh3.Hash128(buf))
}

func appendField(buf []byte, s string) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(s)))
	return append(buf, s...)
}

// fromDigest writes the digest little-endian (low half first) and marks
// the bytes as a version-8, RFC 4122 variant UUID.
func fromDigest(h xxh3.Uint128) ID {
	var id ID
	binary.LittleEndian.PutUint64(id[0:8], h.Lo)
	binary.LittleEndian.PutUint64(id[8:16], h.Hi)
	id[6] = id[6]&0x0F | 0x80
	id[8] = id[8]&0x3F | 0x80
	return id
}
