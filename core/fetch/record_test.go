package fetch

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func batch(first int64, lastDelta int32, deltas ...int64) *sarama.RecordBatch {
	b := &sarama.RecordBatch{FirstOffset: first, LastOffsetDelta: lastDelta, FirstTimestamp: time.Unix(100, 0)}
	for _, d := range deltas {
		b.Records = append(b.Records, &sarama.Record{OffsetDelta: d, TimestampDelta: time.Duration(d) * time.Second,
			Key: []byte("k"), Value: []byte("v")})
	}
	return b
}

func block(bs ...*sarama.RecordBatch) *sarama.FetchResponseBlock {
	fb := &sarama.FetchResponseBlock{}
	for _, b := range bs {
		fb.RecordsSet = append(fb.RecordsSet, &sarama.Records{RecordBatch: b})
	}
	return fb
}

func offsets(rs []Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Offset
	}
	return out
}

func TestRecords(t *testing.T) {
	control := batch(10, 0, 0)
	control.Control = true
	partial := batch(20, 0)
	partial.PartialTrailingRecord = true
	appended := batch(30, 1, 0, 1)
	appended.LogAppendTime = true
	appended.MaxTimestamp = time.Unix(500, 0)
	tests := []struct {
		name        string
		block       *sarama.FetchResponseBlock
		from        int64
		wantOffsets []int64
		wantNext    int64
		wantPartial bool
	}{
		{"records in order", block(batch(0, 2, 0, 1, 2), batch(3, 1, 0, 1)), 0, []int64{0, 1, 2, 3, 4}, 5, false},
		{"a batch fetched from its middle", block(batch(0, 4, 0, 1, 2, 3, 4)), 3, []int64{3, 4}, 5, false},
		{"compaction left a gap at the batch's end", block(batch(0, 9, 0, 4)), 0, []int64{0, 4}, 10, false},
		{"a control batch moves the offset only", block(batch(8, 1, 0, 1), control), 8, []int64{8, 9}, 11, false},
		{"a record too large for the fetch", block(partial), 20, nil, 20, true},
		{"a partial record after whole ones", block(batch(18, 1, 0, 1), partial), 18, []int64{18, 19}, 20, false},
		{"log-append time", block(appended), 30, []int64{30, 31}, 32, false},
		{"an empty block", block(), 7, nil, 7, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := records(tc.block, tc.from)
			got := offsets(out.records)
			if len(got) != len(tc.wantOffsets) {
				t.Fatalf("offsets %v, want %v", got, tc.wantOffsets)
			}
			for i := range got {
				if got[i] != tc.wantOffsets[i] {
					t.Fatalf("offsets %v, want %v", got, tc.wantOffsets)
				}
			}
			if out.next != tc.wantNext || out.partial != tc.wantPartial {
				t.Fatalf("next %d partial %v, want %d %v", out.next, out.partial, tc.wantNext, tc.wantPartial)
			}
		})
	}
	t.Run("the largest batch", func(t *testing.T) {
		// Records of two bytes each ("k", "v"); records before the fetch
		// offset and control batches do not count.
		b := block(batch(0, 1, 0, 1), batch(2, 2, 0, 1, 2), control, batch(20, 3, 0, 1, 2, 3))
		for _, tc := range []struct{ from, bytes, records int }{{0, 8, 4}, {21, 6, 3}} {
			out := records(b, int64(tc.from))
			if out.largest != tc.bytes || out.largestRecords != tc.records {
				t.Fatalf("from %d: largest batch %d bytes in %d records, want %d in %d",
					tc.from, out.largest, out.largestRecords, tc.bytes, tc.records)
			}
		}
	})
	t.Run("timestamps", func(t *testing.T) {
		out := records(block(batch(0, 1, 0, 1), appended), 0)
		if !out.records[1].Timestamp.Equal(time.Unix(101, 0)) {
			t.Fatalf("create time %v, want the batch's first plus the record's delta", out.records[1].Timestamp)
		}
		if !out.records[2].Timestamp.Equal(time.Unix(500, 0)) {
			t.Fatalf("log-append time %v, want the batch's max timestamp", out.records[2].Timestamp)
		}
	})
}

// The field nextOffset reads must still be there: without it, a partition
// whose log ends in batches without records would be fetched at the same
// offset forever (TestFetcher covers the behaviour).
func TestNextOffset(t *testing.T) {
	if recordsNextOffset == nil {
		t.Fatal("sarama.FetchResponseBlock has no recordsNextOffset *int64 field any more")
	}
	if _, ok := nextOffset(&sarama.FetchResponseBlock{}); ok {
		t.Fatal("a block without the field set reports an offset")
	}
}

// detach leaves every record with the bytes it had, none of them in the
// response's buffer any more, and a null key or value null.
func TestDetachCopiesOutOfTheResponse(t *testing.T) {
	response := []byte("k1v1hkhvk2v2")
	rs := []Record{
		{Offset: 1, Key: response[0:2], Value: response[2:4],
			Headers: []*sarama.RecordHeader{{Key: response[4:6], Value: response[6:8]}}},
		{Offset: 2, Key: nil, Value: response[10:12]},
		{Offset: 3, Key: response[8:10], Value: response[0:0]},
		{Offset: 4, Key: response[8:10], Value: nil,
			Headers: []*sarama.RecordHeader{{Key: response[4:6]}, {Key: response[6:8], Value: response[0:2]}}},
	}
	type view struct {
		key, value string
		null       [2]bool
		headers    []string
	}
	see := func(rs []Record) []view {
		var out []view
		for _, r := range rs {
			v := view{key: string(r.Key), value: string(r.Value), null: [2]bool{r.Key == nil, r.Value == nil}}
			for _, h := range r.Headers {
				v.headers = append(v.headers, string(h.Key)+"="+string(h.Value))
			}
			out = append(out, v)
		}
		return out
	}
	want := see(rs)
	detach(rs)
	for i := range response {
		response[i] = '#' // the response's buffer is reused or freed
	}
	if got := see(rs); !reflect.DeepEqual(got, want) {
		t.Fatalf("after detach:\n got %+v\nwant %+v", got, want)
	}
	one := detached(Record{Offset: 9, Key: []byte("a"), Value: []byte("b")})
	if string(one.Key) != "a" || string(one.Value) != "b" || one.Offset != 9 {
		t.Fatalf("detached: %+v", one)
	}
}

// detachChunks splits a block into chunks of about chunkBytes, each with
// its own records and buffer, in order and with every byte kept, so that
// a stream frees the block part by part as its records are taken.
func TestDetachChunks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		records   int
		valueSize int
		headers   bool
	}{
		{"none", 0, 0, false},
		{"one record", 1, 10, false},
		{"small records", 5000, 200, true},
		{"records larger than a chunk", 4, chunkBytes + 1, false},
		{"one byte under a chunk each", 3, chunkBytes - 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			response := make([]byte, 0, tc.records*(tc.valueSize+20))
			var rs []Record
			for i := range tc.records {
				k := len(response)
				response = fmt.Appendf(response, "k%d", i)
				v := len(response)
				response = append(response, bytes.Repeat([]byte{byte('a' + i%26)}, tc.valueSize)...)
				r := Record{Offset: int64(i), Key: response[k:v], Value: response[v:]}
				if tc.headers && i%3 == 0 {
					r.Headers = []*sarama.RecordHeader{{Key: response[k:v], Value: response[v : v+1]}}
				}
				rs = append(rs, r)
			}
			want := make([]Record, len(rs))
			wantBytes := 0
			for i, r := range rs {
				w := Record{Offset: r.Offset, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
				for _, h := range r.Headers {
					w.Headers = append(w.Headers, &sarama.RecordHeader{Key: bytes.Clone(h.Key), Value: bytes.Clone(h.Value)})
				}
				want[i] = w
				wantBytes += recordBytes(&w)
			}

			chunks, size := detachChunks(rs)
			for i := range response {
				response[i] = '#'
			}
			if size != wantBytes {
				t.Fatalf("bytes %d, want %d", size, wantBytes)
			}
			var got []Record
			for i, c := range chunks {
				if len(c) == 0 {
					t.Fatalf("chunk %d is empty", i)
				}
				n := 0
				for j := range c {
					n += recordBytes(&c[j])
				}
				if last := recordBytes(&c[len(c)-1]); len(c) > 1 && n-last >= chunkBytes {
					t.Fatalf("chunk %d holds %d bytes before its last record, a chunk is about %d", i, n-last, chunkBytes)
				}
				got = append(got, c...)
			}
			if tc.records*tc.valueSize > 2*chunkBytes && len(chunks) < 2 {
				t.Fatalf("%d chunks for %d bytes", len(chunks), wantBytes)
			}
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Offset != w.Offset || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || len(g.Headers) != len(w.Headers) {
					t.Fatalf("record %d: offset %d key %q, want offset %d key %q", i, g.Offset, g.Key, w.Offset, w.Key)
				}
				for j := range w.Headers {
					if !bytes.Equal(g.Headers[j].Key, w.Headers[j].Key) || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
						t.Fatalf("record %d header %d: %q=%q", i, j, g.Headers[j].Key, g.Headers[j].Value)
					}
				}
			}
		})
	}
}
