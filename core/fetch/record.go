package fetch

import (
	"reflect"
	"time"

	"github.com/IBM/sarama"
)

// Record is one fetched record. Once decoded, Key, Value and the headers
// share the fetch response's buffers, which nothing writes to; the fetch
// loop and the loader's cache copy them out (detach) before keeping them.
type Record struct {
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []*sarama.RecordHeader
}

// blockRecords is what one partition's block of a fetch response holds
// from offset from on: its records, the offset to fetch next, and whether
// the block ended in a record too large for the fetch size, with nothing
// before it.
type blockRecords struct {
	records []Record
	// largest is the bytes of keys, values and headers of the block's
	// largest batch (or legacy message set), and largestRecords its
	// records.
	largest, largestRecords int
	next                    int64
	partial                 bool
}

// add appends r and returns its bytes (recordBytes).
func (out *blockRecords) add(r Record) int {
	out.records = append(out.records, r)
	return recordBytes(&r)
}

// batchDone notes a batch (or legacy message set) of which records
// holding bytes were added.
func (out *blockRecords) batchDone(records, bytes int) {
	if bytes > out.largest {
		out.largest, out.largestRecords = bytes, records
	}
}

// records decodes a block. Control records (transaction markers) are
// skipped but move next past them, as do records before from: a
// compressed batch is always returned whole, even when the fetch started
// inside it.
func records(block *sarama.FetchResponseBlock, from int64) blockRecords {
	n := 0
	for _, rs := range block.RecordsSet {
		if rs.RecordBatch != nil {
			n += len(rs.RecordBatch.Records)
		} else if rs.MsgSet != nil {
			n += len(rs.MsgSet.Messages)
		}
	}
	var all []Record
	if n > 0 {
		// One allocation for the whole block.
		all = make([]Record, 0, n)
	}
	return recordsInto(all, block, from)
}

// recordsInto is records appending to dst, whose array the caller may
// reuse once it is done with the records.
func recordsInto(dst []Record, block *sarama.FetchResponseBlock, from int64) blockRecords {
	out := blockRecords{records: dst[:0], next: from}
	for _, rs := range block.RecordsSet {
		switch {
		case rs.RecordBatch != nil:
			out.batch(rs.RecordBatch)
		case rs.MsgSet != nil:
			out.messageSet(rs.MsgSet)
		}
	}
	if len(out.records) == 0 && out.next == from {
		out.partial = block.Partial || trailingPartial(block)
		if next, ok := nextOffset(block); ok && !out.partial && next > from && next <= block.HighWaterMarkOffset {
			// Only batches without records: compaction keeps a batch whose
			// records are all gone (for its producer's state), and sarama
			// leaves such batches out of RecordsSet. Move past them, or
			// the partition would be fetched at this offset forever.
			out.next = next
		}
	}
	return out
}

// recordsNextOffset is the index of FetchResponseBlock's unexported
// recordsNextOffset (*int64): the offset after the last batch sarama
// decoded, counting those it left out for holding no record. sarama's own
// consumer moves past such batches with it; nothing exported says where
// they end. TestNextOffset fails if a sarama upgrade drops the field.
var recordsNextOffset = func() []int {
	f, ok := reflect.TypeFor[sarama.FetchResponseBlock]().FieldByName("recordsNextOffset")
	if !ok || f.Type != reflect.TypeFor[*int64]() {
		return nil
	}
	return f.Index
}()

// nextOffset reads recordsNextOffset, if the block has it.
func nextOffset(block *sarama.FetchResponseBlock) (int64, bool) {
	if recordsNextOffset == nil {
		return 0, false
	}
	v := reflect.ValueOf(block).Elem().FieldByIndex(recordsNextOffset)
	if v.IsNil() {
		return 0, false
	}
	return v.Elem().Int(), true
}

func (out *blockRecords) batch(b *sarama.RecordBatch) {
	if b.PartialTrailingRecord && len(b.Records) == 0 {
		return
	}
	if !b.Control {
		had, bytes := len(out.records), 0
		for _, r := range b.Records {
			offset := b.FirstOffset + r.OffsetDelta
			if offset < out.next {
				continue
			}
			ts := b.FirstTimestamp.Add(r.TimestampDelta)
			if b.LogAppendTime {
				ts = b.MaxTimestamp
			}
			bytes += out.add(Record{Offset: offset, Timestamp: ts, Key: r.Key, Value: r.Value, Headers: r.Headers})
			out.next = offset + 1
		}
		out.batchDone(len(out.records)-had, bytes)
	}
	// The batch's last offset may lie past its last record (compaction
	// keeps a batch's offset range), and a control batch has only markers.
	if b.PartialTrailingRecord {
		return
	}
	if last := b.FirstOffset + int64(b.LastOffsetDelta); last >= out.next {
		out.next = last + 1
	}
}

// messageSet decodes the message formats before Kafka 0.11 (magic 0 and
// 1), which old segments of a log may still hold.
func (out *blockRecords) messageSet(ms *sarama.MessageSet) {
	for _, block := range ms.Messages {
		had, bytes := len(out.records), 0
		inner := block.Messages()
		for _, m := range inner {
			offset := m.Offset
			ts := m.Msg.Timestamp
			if m.Msg.Version >= 1 && len(inner) > 0 {
				// Inner offsets of a compressed v1 wrapper are relative to
				// the wrapper's, which is the last inner message's.
				offset += block.Offset - inner[len(inner)-1].Offset
				if m.Msg.LogAppendTime {
					ts = block.Msg.Timestamp
				}
			}
			if offset < out.next {
				continue
			}
			bytes += out.add(Record{Offset: offset, Timestamp: ts, Key: m.Msg.Key, Value: m.Msg.Value})
			out.next = offset + 1
		}
		out.batchDone(len(out.records)-had, bytes)
	}
}

func trailingPartial(block *sarama.FetchResponseBlock) bool {
	for _, rs := range block.RecordsSet {
		if rs.RecordBatch != nil && rs.RecordBatch.PartialTrailingRecord {
			return true
		}
		if rs.MsgSet != nil && rs.MsgSet.PartialTrailingMessage {
			return true
		}
	}
	return false
}

// detach copies the bytes of rs (keys, values and headers) out of the
// fetch response they were decoded from into one allocation for them all,
// in place. A response holds a block for each of the partitions it
// answers: records waiting in a stream that shared it kept the whole
// response alive, about 20 MB of a consumer's heap under a backlog where
// the records themselves were a tenth of that. One allocation per chunk
// (detachChunks) costs a copy of bytes the admission copies again, and
// frees the response as soon as its blocks are decoded.
func detach(rs []Record) {
	n, headers := 0, 0
	for i := range rs {
		n += recordBytes(&rs[i])
		headers += len(rs[i].Headers)
	}
	copyOut(rs, n, headers)
}

// copyOut is detach for records whose bytes (recordBytes) and headers
// are already counted.
func copyOut(rs []Record, n, headers int) {
	buf := make([]byte, 0, n)
	cp := func(b []byte) []byte {
		if b == nil {
			return nil // a null key or value stays null
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	var hs []sarama.RecordHeader
	var ptrs []*sarama.RecordHeader
	if headers > 0 {
		hs = make([]sarama.RecordHeader, headers)
		ptrs = make([]*sarama.RecordHeader, headers)
	}
	for i := range rs {
		r := &rs[i]
		r.Key, r.Value = cp(r.Key), cp(r.Value)
		if len(r.Headers) == 0 {
			continue
		}
		own := ptrs[:len(r.Headers):len(r.Headers)]
		for j, h := range r.Headers {
			hs[j] = sarama.RecordHeader{Key: cp(h.Key), Value: cp(h.Value)}
			own[j] = &hs[j]
		}
		r.Headers = own
		hs, ptrs = hs[len(own):], ptrs[len(own):]
	}
}

// chunkBytes is about how many bytes one chunk of a block holds
// (detachChunks): keys, values, headers and Record structs.
const chunkBytes = 128 << 10

// detachChunks copies rs, the records of one block, out of the fetch
// response into chunks of about chunkBytes each, every chunk with its own
// array of records and its own buffer (detach), and returns them and the
// bytes they hold.
//
// Chunks let what a stream holds follow what is still queued: a block of
// about 2 MiB of records (Stream.resize) would otherwise be kept whole
// until its last record was taken. In chunks, each part is freed as soon
// as the reader has taken it.
func detachChunks(rs []Record) (chunks [][]Record, bytes int) {
	for len(rs) > 0 {
		n, size, headers, held := 0, 0, 0, 0
		for n < len(rs) && (n == 0 || held < chunkBytes) {
			b := recordBytes(&rs[n])
			size += b
			headers += len(rs[n].Headers)
			held += b + recordSize
			n++
		}
		c := make([]Record, n)
		copy(c, rs[:n])
		copyOut(c, size, headers)
		chunks = append(chunks, c)
		bytes += size
		rs = rs[n:]
	}
	return chunks, bytes
}

// recordBytes is the size of a record's key, value and headers.
func recordBytes(r *Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// detached is r with its bytes in an allocation of its own (detach), for
// a record kept alone, as the loader's cache keeps them.
func detached(r Record) Record {
	rs := []Record{r}
	detach(rs)
	return rs[0]
}
