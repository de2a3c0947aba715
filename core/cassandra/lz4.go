package cassandra

import (
	"encoding/binary"
	"fmt"

	"github.com/pierrec/lz4/v4"
)

// lz4Compressor compresses native-protocol frames the way Cassandra expects
// for protocol v4: a 4-byte big-endian uncompressed length followed by one
// raw LZ4 block. gocql ships LZ4 only as a separate module; pierrec/lz4 is
// already in the build through the Kafka client, so this costs no new
// dependency.
type lz4Compressor struct{}

func (lz4Compressor) Name() string { return "lz4" }

func (lz4Compressor) Encode(data []byte) ([]byte, error) {
	buf := make([]byte, 4+lz4.CompressBlockBound(len(data)))
	binary.BigEndian.PutUint32(buf, uint32(len(data)))
	if len(data) == 0 {
		return buf[:4], nil
	}
	// The package's function takes a compressor from its pool: one of our
	// own would be a 128 KiB table on the heap per frame.
	n, err := lz4.CompressBlock(data, buf[4:], nil)
	if err != nil {
		return nil, fmt.Errorf("lz4 encode: %w", err)
	}
	return buf[:4+n], nil
}

func (lz4Compressor) Decode(data []byte) ([]byte, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("lz4 decode: frame body of %d bytes has no length prefix", len(data))
	}
	size := binary.BigEndian.Uint32(data)
	if size == 0 {
		return nil, nil
	}
	// Native protocol frames are capped at 256 MiB; refuse anything larger
	// rather than allocate whatever a corrupt prefix says.
	if size > 256<<20 {
		return nil, fmt.Errorf("lz4 decode: uncompressed length %d exceeds the frame limit", size)
	}
	out := make([]byte, size)
	n, err := lz4.UncompressBlock(data[4:], out)
	if err != nil {
		return nil, fmt.Errorf("lz4 decode: %w", err)
	}
	return out[:n], nil
}
