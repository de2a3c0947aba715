package statestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/fault"
)

// handleBytes is the length of Pending.id: the record's timeuuid and its
// write timestamp, so Settle needs no second read.
const handleBytes = 16 + 8

func makeHandle(id gocql.UUID, ts int64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), id[:]...), uint64(ts))
}

func parseHandle(h []byte) (gocql.UUID, int64, error) {
	if len(h) != handleBytes {
		return gocql.UUID{}, 0, fault.Terminal(errors.New("statestore: not a pending write of the Cassandra store"))
	}
	var id gocql.UUID
	copy(id[:], h)
	return id, int64(binary.BigEndian.Uint64(h[16:])), nil
}

// record writes the serialized write (encodeRecord, with ts: deletions at
// ts, insertions at ts+1) in chunks of at most the batch limit, then the
// header (chunk 0: the chunk count). Only a record with its header is
// pending: the header goes in after every chunk, and nothing of the write
// is applied before it.
func (c *cassandraStore) record(ctx context.Context, k Key, w Write, ts int64) (gocql.UUID, error) {
	data := encodeRecord(k, w, ts)
	id := gocql.UUIDFromTime(c.now())
	n := 0
	for start := 0; start < len(data); start += c.batchLimit {
		n++
		chunk := data[start:min(start+c.batchLimit, len(data))]
		if err := c.s.Query(ctx, c.q.insertPending, k.Namespace, id, n, chunk).Exec(); err != nil {
			return gocql.UUID{}, wrap(err, "record chunk %d of a large write to %q of %q", n, k.Key, k.Namespace)
		}
	}
	header := binary.BigEndian.AppendUint32(nil, uint32(n))
	if err := c.s.Query(ctx, c.q.insertPending, k.Namespace, id, 0, header).Exec(); err != nil {
		return gocql.UUID{}, wrap(err, "record a large write to %q of %q", k.Key, k.Namespace)
	}
	return id, nil
}

func (c *cassandraStore) forget(ctx context.Context, namespace string, id gocql.UUID) error {
	if err := c.s.Query(ctx, c.q.deletePending, namespace, id).Exec(); err != nil {
		return wrap(err, "remove the record of settled write %v of %q", id, namespace)
	}
	return nil
}

// Pending reads every record of the namespace, oldest first. Records
// without a header that are older than sinceRecorded were abandoned
// before anything of them was applied: they are removed.
func (c *cassandraStore) Pending(ctx context.Context, namespace string) ([]Pending, error) {
	type partial struct {
		id     gocql.UUID
		count  int // from the header; -1 when it is missing
		chunks [][]byte
	}
	var recs []*partial
	iter := c.s.Query(ctx, c.q.selectPending, namespace).Iter()
	var id gocql.UUID
	var chunk int
	var data []byte
	for iter.Scan(&id, &chunk, &data) {
		if len(recs) == 0 || recs[len(recs)-1].id != id {
			recs = append(recs, &partial{id: id, count: -1})
		}
		r := recs[len(recs)-1]
		if chunk == 0 {
			if len(data) == 4 {
				r.count = int(binary.BigEndian.Uint32(data))
			}
			continue
		}
		if chunk == len(r.chunks)+1 {
			r.chunks = append(r.chunks, data)
		}
		data = nil
	}
	if err := iter.Close(); err != nil {
		return nil, wrap(err, "read the pending writes of %q", namespace)
	}
	var out []Pending
	for _, r := range recs {
		if r.count < 0 || len(r.chunks) != r.count {
			if c.now().Sub(r.id.Time()) > sinceRecorded {
				if err := c.forget(ctx, namespace, r.id); err != nil {
					return nil, err
				}
			}
			continue
		}
		var all []byte
		for _, ch := range r.chunks {
			all = append(all, ch...)
		}
		k, w, ts, err := decodeRecord(all)
		if err != nil {
			return nil, fault.Terminal(fmt.Errorf("statestore: pending write %v of %q: %w", r.id, namespace, err))
		}
		p := Pending{Key: k, Write: w, Written: r.id.Time(), id: makeHandle(r.id, ts)}
		if w.Marker != nil {
			p.Source = w.Marker.Source
		}
		out = append(out, p)
	}
	return out, nil
}
