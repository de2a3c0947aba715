package timerstore

import "time"

// maxExpiration is the last expiration instant (epoch seconds, 2038-01-19)
// Cassandra accepts while it runs with its default 4.x storage
// compatibility: later expirations make the write fail (CASSANDRA-14092).
const maxExpiration = 1<<31 - 2

// maxTTL is the bound from which the original writes rows without a TTL
// (20 years); Cassandra itself rejects TTLs above this.
const maxTTL = 630_720_000

// RowTTL returns the TTL in seconds for a row that must live until target
// (epoch seconds) plus retention. A target in the past keeps the row for
// retention only. Zero means "no TTL": used when the sum reaches maxTTL,
// which is not clamped so a far-future timer is never cut short. For the
// same reason, and because the write would otherwise be rejected, a row
// that would expire after maxExpiration is also written without a TTL; the
// original does not do this and fails such writes instead. Zero can be
// passed to USING TTL as is: Cassandra reads TTL 0 as "never expires".
// Other stores whose rows live relative to a timer's time (the deferred
// timers) use it too, so every table follows one formula.
func RowTTL(target int64, now time.Time, retention time.Duration) int {
	ret := int64(retention / time.Second)
	delta := target - now.Unix()
	if delta < 0 {
		delta = 0
	}
	sum := delta + ret
	if sum < delta || sum >= maxTTL || now.Unix()+sum > maxExpiration {
		return 0
	}
	return int(sum)
}
