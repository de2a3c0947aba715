package statestore

import (
	"context"
	"fmt"
	"time"
)

// stmt is one statement of a write with its estimated size.
type stmt struct {
	text string
	args []any
	size int
}

// stmtOverhead approximates what a statement adds to a batch beyond its
// values: the prepared id, value lengths and the cells' timestamps and
// TTLs in the mutation.
const stmtOverhead = 48

// statements renders the compiled write for k: deletions at ts, insertions
// at ts+1, so that a deletion in a write never shadows the same write's
// insertion (a tombstone wins a timestamp tie), and the marker last.
func (c *cassandraStore) statements(k Key, cw compiled, ts int64) []stmt {
	base := len(k.Namespace) + len(k.Key) + stmtOverhead
	out := make([]stmt, 0, len(cw.deletes)+len(cw.puts))
	for _, op := range cw.deletes {
		s := stmt{size: base + len(op.coll) + len(op.item) + len(op.to)}
		switch op.kind {
		case opDeleteCollection:
			s.text, s.args = c.q.deleteCollection, []any{ts, k.Namespace, k.Key, op.coll}
		case opDeleteRow:
			s.text, s.args = c.q.deleteRow, []any{ts, k.Namespace, k.Key, op.coll, []byte(op.item)}
		case opDeleteRange:
			s.text, s.args = c.q.deleteRange, []any{ts, k.Namespace, k.Key, op.coll, []byte(op.item), []byte(op.to)}
		}
		out = append(out, s)
	}
	for _, op := range cw.puts {
		out = append(out, stmt{
			text: c.q.insertRow,
			args: []any{k.Namespace, k.Key, op.coll, []byte(op.item), op.value, ts + 1, ttlSeconds(op.ttl)},
			size: base + len(op.coll) + len(op.item) + len(op.value),
		})
	}
	return out
}

// Apply writes w in one single-partition batch: Cassandra applies it
// atomically and in isolation. A write estimated over the batch limit is
// recorded in state_pending first and then applied in parts (applyLarge).
func (c *cassandraStore) Apply(ctx context.Context, k Key, w Write) error {
	cw, err := compile(w, 0)
	if err != nil {
		return err
	}
	// Two timestamps are reserved so that the next write's deletions
	// (at the next timestamp handed out) are newer than these insertions.
	ts := c.s.Timestamp()
	c.s.Timestamp()
	stmts := c.statements(k, cw, ts)
	if len(stmts) == 0 {
		return nil
	}
	size := 0
	for _, s := range stmts {
		size += s.size
	}
	if size <= c.batchLimit {
		if err := c.exec(ctx, stmts); err != nil {
			return wrap(err, "apply a write to %q of %q", k.Key, k.Namespace)
		}
		return nil
	}
	return c.applyLarge(ctx, k, w, ts, stmts)
}

// exec runs statements of one partition as one batch, or as a plain
// statement when there is one: a single statement larger than the batch
// limit (one big value) is no batch at all then.
func (c *cassandraStore) exec(ctx context.Context, stmts []stmt) error {
	if len(stmts) == 1 {
		return c.s.Query(ctx, stmts[0].text, stmts[0].args...).Exec()
	}
	b := c.s.Batch(ctx)
	for _, s := range stmts {
		b.Query(s.text, s.args...)
	}
	return c.s.ExecuteBatch(b)
}

// parts splits statements into batches under the limit, keeping their
// order, so the marker (last) goes in the last part: a marker is never
// visible before everything it vouches for.
func (c *cassandraStore) parts(stmts []stmt) [][]stmt {
	var out [][]stmt
	var cur []stmt
	size := 0
	for _, s := range stmts {
		if len(cur) > 0 && size+s.size > c.batchLimit {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, s)
		size += s.size
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// applyLarge records the write, applies it part by part and removes the
// record. Every part carries the recorded timestamps, so re-applying the
// record rewrites the same cells and loses to anything written since.
//
// Once the record may be pending (its header written, even if that write
// failed), a failure can leave part of the write visible; the caller must
// not go on from there, as its retry would run on half-applied state. So
// the write is settled at once, in this call: if that succeeds, the write
// is applied whole and Apply succeeds; if not, Apply returns a
// PartialWriteError with the record, to be settled before the key is used
// again (or, after a crash, by whoever lists it with Pending).
func (c *cassandraStore) applyLarge(ctx context.Context, k Key, w Write, ts int64, stmts []stmt) error {
	h, err := c.record(ctx, k, w, ts)
	if h == nil {
		return err // nothing is pending, nothing was applied
	}
	id, _, _, _ := parseHandle(h)
	if err == nil {
		if err = c.applyParts(ctx, k, stmts); err == nil {
			return c.forget(ctx, k.Namespace, id)
		}
	}
	p := newPending(k, w, id, h)
	if serr := c.Settle(ctx, p); serr != nil {
		return &PartialWriteError{Pending: p, Err: fmt.Errorf("%w; settling it at once failed too: %w", err, serr)}
	}
	return nil
}

func (c *cassandraStore) applyParts(ctx context.Context, k Key, stmts []stmt) error {
	for i, part := range c.parts(stmts) {
		if err := c.exec(ctx, part); err != nil {
			return wrap(err, "apply part %d of a large write to %q of %q", i, k.Key, k.Namespace)
		}
		if c.afterPart != nil {
			if err := c.afterPart(i); err != nil {
				return fmt.Errorf("statestore: after part %d: %w", i, err)
			}
		}
	}
	return nil
}

// Settle re-applies the recorded write with its recorded timestamps and
// TTLs shortened by the time since it was recorded, then removes the
// record. It writes the record's header again first: a record handed
// over by Apply (PartialWriteError) may lack it, and a settle cut short
// must leave a record that Pending lists.
func (c *cassandraStore) Settle(ctx context.Context, p Pending) error {
	id, ts, chunks, err := parseHandle(p.id)
	if err != nil {
		return err
	}
	cw, err := compile(p.Write, max(c.now().Sub(p.Written), 0))
	if err != nil {
		return err
	}
	if err := c.writeHeader(ctx, p.Key.Namespace, id, chunks); err != nil {
		return err
	}
	if stmts := c.statements(p.Key, cw, ts); len(stmts) > 0 {
		if err := c.applyParts(ctx, p.Key, stmts); err != nil {
			return err
		}
	}
	return c.forget(ctx, p.Key.Namespace, id)
}

// sinceRecorded is how old a record may be before Pending takes it as
// abandoned when it lacks its header: writing every chunk takes seconds,
// so a record older than this was left by a writer that died.
const sinceRecorded = time.Hour
