// Package payload reads the two top-level fields of a JSON message payload
// that the consumer acts on before the handler runs: "id" (deduplication,
// producer id cache) and "type" (the allowed-events filter).
//
// The consumer calls Meta once per record on the hot path, so it is a
// hand-written scanner rather than a decode into map[string]any: it validates
// the whole document and copies out only the two strings it is asked for.
// encoding/json and goccy/go-json struct decoders were measured and were 2x
// to 10x slower; they also match keys case-insensitively, which the rules
// forbid. See meta.go for the exact rules and bench_test.go for the numbers.
package payload
