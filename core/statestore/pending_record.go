package statestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
)

// A pending record is the write it stands for, serialized in a binary
// form of its own: strings (the Kafka key, map keys) are arbitrary bytes
// and are kept as they are (JSON would replace invalid UTF-8), nil and
// empty byte slices stay apart (a nil Value leaves a value unchanged),
// and values are not inflated by a text encoding.
//
//	record  = version:1 ts:varint key change-count:uvarint change* marker
//	key     = namespace:str key:str
//	change  = collection:str kind:str ttl:varint clear:bool value:opt
//	          puts:uvarint (key:str value:opt)* removes:uvarint str*
//	          has-bounds:bool [head:varint tail:varint]
//	          slots:uvarint (index:varint value:opt)*
//	          drops:uvarint (from:varint to:varint)*
//	marker  = has-marker:bool [source:str offset:varint ttl:varint]
//	str     = length:uvarint bytes
//	opt     = 0 (nil) | length+1:uvarint bytes
//
// A change of the types written here needs a new recordVersion (a test
// counts their fields).
const recordVersion = 1

func encodeRecord(k Key, w Write, ts int64) []byte {
	e := recordEncoder{b: []byte{recordVersion}}
	e.varint(ts)
	e.str(k.Namespace)
	e.str(k.Key)
	e.uvarint(uint64(len(w.Changes)))
	for _, ch := range w.Changes {
		e.str(ch.Collection)
		e.str(string(ch.Kind))
		e.varint(int64(ch.TTL))
		e.bool(ch.Clear)
		e.opt(ch.Value)
		e.uvarint(uint64(len(ch.Puts)))
		for _, p := range ch.Puts {
			e.str(p.Key)
			e.opt(p.Value)
		}
		e.uvarint(uint64(len(ch.Removes)))
		for _, r := range ch.Removes {
			e.str(r)
		}
		e.bool(ch.Bounds != nil)
		if ch.Bounds != nil {
			e.varint(ch.Bounds.Head)
			e.varint(ch.Bounds.Tail)
		}
		e.uvarint(uint64(len(ch.Slots)))
		for _, s := range ch.Slots {
			e.varint(s.Index)
			e.opt(s.Value)
		}
		e.uvarint(uint64(len(ch.Drops)))
		for _, r := range ch.Drops {
			e.varint(r.From)
			e.varint(r.To)
		}
	}
	e.bool(w.Marker != nil)
	if m := w.Marker; m != nil {
		e.str(m.Source)
		e.varint(m.Offset)
		e.varint(int64(m.TTL))
	}
	return e.b
}

type recordEncoder struct{ b []byte }

func (e *recordEncoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *recordEncoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }

func (e *recordEncoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *recordEncoder) opt(v []byte) {
	if v == nil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(len(v)) + 1)
	e.b = append(e.b, v...)
}

func (e *recordEncoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

var errBadRecord = errors.New("malformed pending record")

// decodeRecord is encodeRecord's inverse. It trusts nothing of data: a
// truncated or corrupt record is an error, never a panic or a huge
// allocation.
func decodeRecord(data []byte) (Key, Write, int64, error) {
	if len(data) == 0 || data[0] != recordVersion {
		if len(data) == 0 {
			return Key{}, Write{}, 0, fmt.Errorf("%w: empty", errBadRecord)
		}
		return Key{}, Write{}, 0, fmt.Errorf("%w: version %d, want %d", errBadRecord, data[0], recordVersion)
	}
	d := recordDecoder{b: data[1:]}
	ts := d.varint()
	k := Key{Namespace: d.str(), Key: d.str()}
	var w Write
	w.Changes = decodeList(&d, func() (ch Change) {
		ch.Collection = d.str()
		ch.Kind = config.CollectionKind(d.str())
		ch.TTL = time.Duration(d.varint())
		ch.Clear = d.bool()
		ch.Value = d.opt()
		ch.Puts = decodeList(&d, func() Entry { return Entry{Key: d.str(), Value: d.opt()} })
		ch.Removes = decodeList(&d, d.str)
		if d.bool() {
			ch.Bounds = &Bounds{Head: d.varint(), Tail: d.varint()}
		}
		ch.Slots = decodeList(&d, func() Slot { return Slot{Index: d.varint(), Value: d.opt()} })
		ch.Drops = decodeList(&d, func() Range { return Range{From: d.varint(), To: d.varint()} })
		return ch
	})
	if d.bool() {
		w.Marker = &Marker{Source: d.str(), Offset: d.varint(), TTL: time.Duration(d.varint())}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d bytes after its end", errBadRecord, len(d.b))
	}
	if d.err != nil {
		return Key{}, Write{}, 0, d.err
	}
	return k, w, ts, nil
}

// recordDecoder reads what recordEncoder wrote. The first error sticks:
// every read after it returns a zero value.
// decodeList reads a count and that many items (nil for none), stopping
// at the first error.
func decodeList[T any](d *recordDecoder, item func() T) []T {
	n := d.count()
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		if out[i] = item(); d.err != nil {
			return out[:i]
		}
	}
	return out
}

type recordDecoder struct {
	b   []byte
	err error
}

func (d *recordDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or corrupt %s", errBadRecord, what)
	}
	d.b = nil
}

func (d *recordDecoder) uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// take returns the next n bytes (n comes from the data: it is checked
// against what is left before anything is allocated).
func (d *recordDecoder) take(n uint64, what string) []byte {
	if n > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) str() string { return string(d.take(d.uvarint("length"), "string")) }

func (d *recordDecoder) opt() []byte {
	n := d.uvarint("length")
	if n == 0 || d.err != nil {
		return nil
	}
	return append([]byte{}, d.take(n-1, "bytes")...)
}

func (d *recordDecoder) bool() bool {
	v := d.take(1, "flag")
	if len(v) == 1 && v[0] > 1 {
		d.fail("flag")
	}
	return len(v) == 1 && v[0] == 1
}

// count reads the length of a list; every element takes a byte at least,
// so a count over what is left is corrupt.
func (d *recordDecoder) count() int {
	n := d.uvarint("count")
	if n > uint64(len(d.b)) {
		d.fail("count")
		return 0
	}
	return int(n)
}
