// Package filter holds the checks the partition pipeline applies before a
// message reaches the handler (spec §3.5, §8): the source-system loop filter,
// the allowed-events prefix filter, and the Reason values with which skipped
// and undecodable records are logged, counted and traced.
package filter
