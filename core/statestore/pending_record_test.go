package statestore

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
)

// fullRecord uses every field of every type a record holds, with bytes
// that are not UTF-8 wherever a string may hold them, nil beside empty
// byte slices, and extreme integers.
func fullRecord() (Key, Write, int64) {
	k := Key{Namespace: "g\xc3", Key: "\xff\xfeid"}
	w := Write{Changes: []Change{
		{Collection: "v\xff", Kind: config.CollectionValue, TTL: time.Hour + time.Nanosecond, Clear: true, Value: []byte{}},
		{Collection: "v2", Kind: config.CollectionValue, Value: []byte("\x00\xff")},
		{Collection: "unchanged", Kind: config.CollectionValue}, // nil Value: unchanged
		{Collection: "m", Kind: config.CollectionMap, TTL: maxTTL,
			Puts:    []Entry{{Key: "\xc3", Value: []byte("1")}, {Key: "", Value: []byte{}}, {Key: "nil", Value: nil}},
			Removes: []string{"\xfe\xff", ""}},
		{Collection: "d", Kind: config.CollectionDeque, Bounds: &Bounds{Head: math.MinInt64, Tail: math.MaxInt64},
			Slots: []Slot{{Index: math.MinInt64, Value: []byte("a")}, {Index: -1, Value: []byte{}}, {Index: math.MaxInt64}},
			Drops: []Range{{From: -5, To: 5}, {From: math.MinInt64, To: math.MaxInt64}}},
		{Collection: "d0", Kind: config.CollectionDeque, Bounds: &Bounds{}},
	}, Marker: &Marker{Source: "t\xff/3", Offset: math.MaxInt64, TTL: 20 * time.Minute}}
	return k, w, math.MinInt64 + 1
}

func TestPendingRecordRoundTrip(t *testing.T) {
	k, w, ts := fullRecord()
	for _, tc := range []struct {
		k  Key
		w  Write
		ts int64
	}{
		{k, w, ts},
		{Key{Namespace: "g", Key: "\xff\xfeid"}, Write{Changes: []Change{{Collection: "m", Kind: config.CollectionMap,
			Puts: []Entry{{Key: "\xc3", Value: []byte("1")}}}}}, 7},
		{Key{}, Write{}, 0},
		{Key{Key: "k"}, Write{Marker: &Marker{Source: "s/0"}}, -1},
	} {
		data := encodeRecord(tc.k, tc.w, tc.ts)
		gk, gw, gts, err := decodeRecord(data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if gk != tc.k || gts != tc.ts || !reflect.DeepEqual(gw, tc.w) {
			t.Fatalf("round trip changed the record:\nkey %q → %q, ts %d → %d\nwrite %+v\n   → %+v", tc.k, gk, tc.ts, gts, tc.w, gw)
		}
	}
}

// Every truncation of a record, and a record with anything after its
// end, is refused: never a panic, never a shorter write taken as whole.
func TestPendingRecordRefusesCorruptData(t *testing.T) {
	data := encodeRecord(fullRecord())
	for n := range len(data) {
		if _, _, _, err := decodeRecord(data[:n]); !errors.Is(err, errBadRecord) {
			t.Fatalf("decoding the first %d of %d bytes = %v, want errBadRecord", n, len(data), err)
		}
	}
	if _, _, _, err := decodeRecord(append(data[:len(data):len(data)], 0)); !errors.Is(err, errBadRecord) {
		t.Fatalf("trailing byte: %v", err)
	}
	other := append([]byte{recordVersion + 1}, data[1:]...)
	if _, _, _, err := decodeRecord(other); !errors.Is(err, errBadRecord) {
		t.Fatalf("another version: %v", err)
	}
	// A count far beyond the data allocates nothing and fails.
	huge := append([]byte{recordVersion, 0, 0, 0}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	if _, _, _, err := decodeRecord(huge); !errors.Is(err, errBadRecord) {
		t.Fatalf("huge count: %v", err)
	}
}

// The encoding lists the fields of these types by hand: a field added to
// one of them must be added to encodeRecord and decodeRecord (and to
// fullRecord), under a new recordVersion. This counts them.
func TestPendingRecordCoversEveryField(t *testing.T) {
	for _, tc := range []struct {
		t    reflect.Type
		want int
	}{
		{reflect.TypeFor[Key](), 2},
		{reflect.TypeFor[Write](), 2},
		{reflect.TypeFor[Change](), 10},
		{reflect.TypeFor[Entry](), 2},
		{reflect.TypeFor[Bounds](), 2},
		{reflect.TypeFor[Slot](), 2},
		{reflect.TypeFor[Range](), 2},
		{reflect.TypeFor[Marker](), 3},
	} {
		if got := tc.t.NumField(); got != tc.want {
			t.Errorf("%v has %d fields, the pending record encodes %d", tc.t, got, tc.want)
		}
	}
}
