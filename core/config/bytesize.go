package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goccy/go-json"
)

const msgByteSize = `must be a size such as "64 MiB" or a number of bytes, at least 1`

// byteUnits are the units a size may carry: decimal (kB, MB, GB, TB) and
// binary (KiB, MiB, GiB, TiB), case-insensitive, B for bytes.
var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// ParseByteSize reads a human-readable size ("64 MiB", "1.5GB", "4096").
func ParseByteSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult, ok := byteUnits[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("%s, got %q", msgByteSize, s)
	}
	f, err := strconv.ParseFloat(num, 64)
	n := math.Round(f * mult)
	if err != nil || n < 1 || n >= math.MaxUint64 {
		return 0, fmt.Errorf("%s, got %q", msgByteSize, s)
	}
	return uint64(n), nil
}

// byteSizeKind reads a size in bytes: a size string in either source, or
// a JSON number of bytes.
var byteSizeKind = optionalKind(kind[uint64]{
	schemaType: "size",
	text:       ParseByteSize,
	json: func(v any) (uint64, error) {
		switch v := v.(type) {
		case string:
			return ParseByteSize(v)
		case json.Number:
			if n, ok := wholeUnsigned(v); ok && n >= 1 {
				return n, nil
			}
		}
		return 0, fmt.Errorf("%s, got %s", msgByteSize, describeJSON(v))
	},
	format: func(n uint64) string { return strconv.FormatUint(n, 10) + " B" },
}, false)
