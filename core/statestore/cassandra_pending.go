package statestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/fault"
)

// handleBytes is the length of Pending.id: the record's timeuuid, its
// write timestamp and its chunk count, so Settle needs no second read.
const handleBytes = 16 + 8 + 4

func makeHandle(id gocql.UUID, ts int64, chunks int) []byte {
	h := binary.BigEndian.AppendUint64(append([]byte(nil), id[:]...), uint64(ts))
	return binary.BigEndian.AppendUint32(h, uint32(chunks))
}

func parseHandle(h []byte) (id gocql.UUID, ts int64, chunks int, err error) {
	if len(h) != handleBytes {
		return gocql.UUID{}, 0, 0, fault.Terminal(errors.New("statestore: not a pending write of the Cassandra store"))
	}
	copy(id[:], h)
	return id, int64(binary.BigEndian.Uint64(h[16:])), int(binary.BigEndian.Uint32(h[24:])), nil
}

// record writes the serialized write (encodeRecord, with ts: deletions at
// ts, insertions at ts+1) in chunks of at most the batch limit, then the
// header (chunk 0: the chunk count). Only a record with its header is
// pending: the header goes in after every chunk, and nothing of the write
// is applied before it.
//
// It returns the record's handle once every chunk is in. An error without
// a handle means nothing is pending; with one, that the header's write
// failed, which may have landed all the same: the record may be pending.
func (c *cassandraStore) record(ctx context.Context, k Key, w Write, ts int64) ([]byte, error) {
	data := encodeRecord(k, w, ts)
	id := gocql.UUIDFromTime(c.now())
	n := 0
	for start := 0; start < len(data); start += c.batchLimit {
		n++
		chunk := data[start:min(start+c.batchLimit, len(data))]
		if err := c.s.Query(ctx, c.q.insertPending, k.Namespace, id, n, chunk).Exec(); err != nil {
			return nil, wrap(err, "record chunk %d of a large write to %q of %q", n, k.Key, k.Namespace)
		}
	}
	h := makeHandle(id, ts, n)
	err := c.writeHeader(ctx, k.Namespace, id, n)
	if err == nil && c.afterRecord != nil {
		if err = c.afterRecord(id); err != nil {
			err = fmt.Errorf("statestore: after the record's header: %w", err)
		}
	}
	return h, err
}

// writeHeader writes chunk 0 of a record, which makes it pending. Writing
// it again is harmless: it is the same cell with the same value.
func (c *cassandraStore) writeHeader(ctx context.Context, namespace string, id gocql.UUID, chunks int) error {
	header := binary.BigEndian.AppendUint32(nil, uint32(chunks))
	if err := c.s.Query(ctx, c.q.insertPending, namespace, id, 0, header).Exec(); err != nil {
		return wrap(err, "write the header of large write %v of %q", id, namespace)
	}
	return nil
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
		out = append(out, newPending(k, w, r.id, makeHandle(r.id, ts, r.count)))
	}
	return out, nil
}

func newPending(k Key, w Write, id gocql.UUID, handle []byte) Pending {
	p := Pending{Key: k, Write: w, Written: id.Time(), id: handle}
	if w.Marker != nil {
		p.Source = w.Marker.Source
	}
	return p
}
