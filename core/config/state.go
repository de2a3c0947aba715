package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CollectionKind is the shape of a keyed-state collection.
type CollectionKind string

const (
	CollectionValue CollectionKind = "value" // one value per key
	CollectionMap   CollectionKind = "map"   // a map per key
	CollectionDeque CollectionKind = "deque" // a double-ended queue per key
)

// PayloadKind says what a keyed-state collection stores.
type PayloadKind string

const (
	PayloadJSON    PayloadKind = "json"    // JSON values
	PayloadMessage PayloadKind = "message" // whole Kafka messages the handler received
)

// DefaultKeysetLimit is the ordered-scan bound of a map collection that does
// not set KeysetLimit.
const DefaultKeysetLimit = 128

// StateCollection declares one keyed-state collection. In JSON it is an
// object with the keys name, kind, payload, ttl_seconds, read_uncommitted,
// keyset_limit and capacity; null or a missing key leaves an optional field
// unset.
type StateCollection struct {
	Name    string         // unique within the client, not empty
	Kind    CollectionKind // value, map or deque
	Payload PayloadKind    // json or message
	// TTL applies to every write; whole seconds, 1s to 630720000s, and
	// longer than the recovery delay outside mock mode. Absent means no TTL.
	TTL Optional[time.Duration]
	// ReadUncommitted skips transactional staging for this collection.
	ReadUncommitted bool
	// KeysetLimit bounds ordered-scan tracking, 0..4096, maps only; 0 turns
	// tracking off. Absent means DefaultKeysetLimit.
	KeysetLimit Optional[int]
	// Capacity is the largest number of deque slots, 1..4294967295, deques
	// only. Absent means unbounded.
	Capacity Optional[int64]
	// Published makes the collection readable by other services through
	// a reader (JSON collections only; needs Config.Subsystem).
	Published bool
	// ReadCache is how stale a reader of this collection may be served
	// from its cache, overriding state_read_cache_ttl: Some(0) disables
	// the cache. Absent: the process setting. JSON {"ttl_ms": n} or false.
	ReadCache Optional[time.Duration]
}

// KeysetLimitOrDefault returns the effective ordered-scan bound of a map.
func (s StateCollection) KeysetLimitOrDefault() int { return s.KeysetLimit.Or(DefaultKeysetLimit) }

// The messages below are shared word for word with the language bindings.
const (
	msgTTL         = "must be a whole number in 1..=630720000"
	msgKeysetLimit = "must be a whole number in 0..=4096"
	msgCapacity    = "must be a whole number in 1..=4294967295"
	msgCacheSize   = "must be an integer in 1..=18446744073709551615"
)

// collectionsKind reads state_collections, which only JSON (and Go) can set.
var collectionsKind = kind[[]StateCollection]{
	schemaType: "collections",
	json: func(v any) ([]StateCollection, error) {
		items, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("must be a list of collection definitions, got %s", describeJSON(v))
		}
		out := make([]StateCollection, 0, len(items))
		var errs []error
		for i, item := range items {
			sc, itemErrs := parseCollection(i, item)
			out = append(out, sc)
			errs = append(errs, itemErrs...)
		}
		return out, errors.Join(errs...)
	},
	format: func(s []StateCollection) string { return fmt.Sprintf("%d collections", len(s)) },
}

// parseCollection converts one JSON definition. Type problems are reported
// here; range and consistency rules are left to validateState so that Go
// callers get the same checks.
func parseCollection(i int, item any) (StateCollection, []error) {
	var sc StateCollection
	prefix := fmt.Sprintf("state_collections[%d]", i)
	obj, ok := item.(map[string]any)
	if !ok {
		return sc, []error{&OptionError{Option: prefix, Message: "must be an object, got " + describeJSON(item)}}
	}
	var errs []error
	fail := func(field, msg string) { errs = append(errs, &OptionError{Option: prefix + "." + field, Message: msg}) }

	for _, key := range slices.Sorted(maps.Keys(obj)) {
		switch key {
		case "name", "kind", "payload", "ttl_seconds", "read_uncommitted", "keyset_limit", "capacity", "published", "read_cache":
		default:
			fail(userKey(key), "unknown field")
		}
	}

	text := func(field, wrongType string) string {
		switch v := obj[field].(type) {
		case nil:
			fail(field, "missing")
		case string:
			return v
		default:
			fail(field, wrongType+describeJSON(v))
		}
		return ""
	}
	sc.Name = text("name", "must be a string, got ")
	sc.Kind = CollectionKind(text("kind", `expected "value", "map", or "deque", got `))
	sc.Payload = PayloadKind(text("payload", `expected "json" or "message", got `))

	if v := obj["ttl_seconds"]; v != nil {
		if n, ok := wholeNumber(v); ok && n >= 1 && n <= int64(maxTTL/time.Second) {
			sc.TTL = Some(time.Duration(n) * time.Second)
		} else {
			fail("ttl_seconds", msgTTL)
		}
	}
	switch v := obj["read_uncommitted"].(type) {
	case nil:
	case bool:
		sc.ReadUncommitted = v
	default:
		fail("read_uncommitted", "must be true or false, got "+describeJSON(v))
	}
	// Out-of-range whole numbers are kept and rejected by validateState.
	if v := obj["keyset_limit"]; v != nil {
		if n, ok := wholeNumber(v); ok && int64(int(n)) == n {
			sc.KeysetLimit = Some(int(n))
		} else {
			fail("keyset_limit", msgKeysetLimit)
		}
	}
	switch v := obj["published"].(type) {
	case nil:
	case bool:
		sc.Published = v
	default:
		fail("published", "must be true or false, got "+describeJSON(v))
	}
	switch v := obj["read_cache"].(type) {
	case nil:
	case bool:
		if v {
			fail("read_cache", `must be {"ttl_ms": n} or false, got true`)
		} else {
			sc.ReadCache = Some(time.Duration(0))
		}
	case map[string]any:
		n, ok := wholeNumber(v["ttl_ms"])
		if len(v) != 1 || !ok || n < 0 || n > int64(maxTTL/time.Millisecond) {
			fail("read_cache", `must be {"ttl_ms": n} with a whole number of milliseconds n >= 0, or false`)
		} else {
			sc.ReadCache = Some(time.Duration(n) * time.Millisecond)
		}
	default:
		fail("read_cache", `must be {"ttl_ms": n} or false, got `+describeJSON(v))
	}
	if v := obj["capacity"]; v != nil {
		if n, ok := wholeNumber(v); ok {
			sc.Capacity = Some(n)
		} else {
			fail("capacity", msgCapacity)
		}
	}
	return sc, errs
}

// cacheSizeKind reads state_cache_size_bytes. Zero parses, so that
// validation can give its own message for it.
var cacheSizeKind = kind[Optional[uint64]]{
	schemaType: "int",
	text: func(s string) (Optional[uint64], error) {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return None[uint64](), fmt.Errorf("%s", msgCacheSize)
		}
		return Some(n), nil
	},
	json: func(v any) (Optional[uint64], error) {
		n, ok := wholeUnsigned(v)
		if !ok {
			return None[uint64](), fmt.Errorf("%s", msgCacheSize)
		}
		return Some(n), nil
	},
	format: func(o Optional[uint64]) string {
		if n, ok := o.Get(); ok {
			return strconv.FormatUint(n, 10)
		}
		return "none"
	},
}

// validateState checks the keyed-state options. The wording is fixed (the
// bindings document it), so these messages do not end in ", got ...".
func validateState(c *Config, errs *errorList) {
	if d := c.StateRecoveryDelay; d%time.Second != 0 {
		errs.add("state_recovery_delay", "must be a whole number of seconds")
	} else if d < time.Second {
		errs.add("state_recovery_delay", "must be >= 1 second")
	}
	if n, ok := c.StateCacheSizeBytes.Get(); ok && n == 0 {
		errs.add("state_cache_size_bytes", "must be greater than 0")
	}
	if sub, ok := c.Subsystem.Get(); ok && sub == "" {
		errs.add("subsystem", "must not be an empty string")
	}
	if dir, ok := c.StateCacheDir.Get(); ok && dir == "" {
		errs.add("state_cache_dir", "must not be an empty string")
	}

	seen := make(map[string]bool)
	for i, sc := range c.StateCollections {
		field := func(name string) string { return fmt.Sprintf("state_collections[%d].%s", i, name) }
		switch {
		case sc.Name == "":
			errs.add(field("name"), "must not be empty")
		case seen[sc.Name]:
			errs.add(field("name"), fmt.Sprintf("duplicate collection name %q", sc.Name))
		}
		seen[sc.Name] = true

		if sc.Kind != CollectionValue && sc.Kind != CollectionMap && sc.Kind != CollectionDeque {
			errs.add(field("kind"), fmt.Sprintf(`expected "value", "map", or "deque", got %q`, sc.Kind))
		}
		if sc.Payload != PayloadJSON && sc.Payload != PayloadMessage {
			errs.add(field("payload"), fmt.Sprintf(`expected "json" or "message", got %q`, sc.Payload))
		}
		if ttl, ok := sc.TTL.Get(); ok {
			switch {
			case ttl%time.Second != 0 || ttl < time.Second || ttl > maxTTL:
				errs.add(field("ttl_seconds"), msgTTL)
			// The recovery sweep must run before any entry expires; in
			// mock mode nothing is recovered, so the rule does not apply.
			case !c.Mock && ttl <= c.StateRecoveryDelay:
				errs.add(field("ttl_seconds"), fmt.Sprintf("must be greater than state_recovery_delay (%s), got %d",
					FormatDuration(c.StateRecoveryDelay), int64(ttl/time.Second)))
			}
		}
		if n, ok := sc.KeysetLimit.Get(); ok {
			if sc.Kind != CollectionMap {
				errs.add(field("keyset_limit"), "only valid for map collections")
			} else if n < 0 || n > 4096 {
				errs.add(field("keyset_limit"), msgKeysetLimit)
			}
		}
		if sc.Published {
			if sc.Payload == PayloadMessage {
				errs.add(field("published"), "only JSON collections can be published")
			} else if sub, ok := c.Subsystem.Get(); !ok || sub == "" {
				errs.add(field("published"), "a published collection needs a subsystem (the subsystem option or PROSODY_SUBSYSTEM)")
			}
		}
		if n, ok := sc.Capacity.Get(); ok {
			if sc.Kind != CollectionDeque {
				errs.add(field("capacity"), "only valid for deque collections")
			} else if n < 1 || n > 4294967295 {
				errs.add(field("capacity"), msgCapacity)
			}
		}
	}
}
