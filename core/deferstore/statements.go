package deferstore

// statements holds the CQL text of every operation, built once per store so
// that gocql's per-connection prepared-statement cache is hit every time.
type statements struct {
	insertSegment string
	offsets       queueStatements
	timers        queueStatements
}

// queueStatements are the statements of one queue table. Column lists
// differ between the tables; the operations are the same.
type queueStatements struct {
	// selectHead reads the static row only (DISTINCT), so completed entries'
	// tombstones are never scanned.
	selectHead string
	// selectFirst reads the first live row: legacy partitions without the
	// head hint are repaired from it.
	selectFirst, selectAfter, selectAll               string
	insertFirst, insertEntry, setStatics              string
	deleteEntry, deleteBefore, deleteAfter, deleteKey string
}

func newStatements(ks string) statements {
	offsets := ks + ".deferred_offsets"
	timers := ks + ".deferred_timers"
	const pk = ` WHERE segment_id = ? AND key = ?`
	return statements{
		insertSegment: `INSERT INTO ` + ks + `.deferred_segments (id, topic, partition, consumer_group) VALUES (?, ?, ?, ?)`,
		offsets: queueStatements{
			selectHead:   `SELECT DISTINCT segment_id, key, next_offset, retry_count FROM ` + offsets + pk,
			selectFirst:  `SELECT offset FROM ` + offsets + pk + ` LIMIT 1`,
			selectAfter:  `SELECT offset FROM ` + offsets + pk + ` AND offset > ? LIMIT 1`,
			insertFirst:  `INSERT INTO ` + offsets + ` (segment_id, key, offset, retry_count, next_offset) VALUES (?, ?, ?, ?, ?) USING TTL ?`,
			insertEntry:  `INSERT INTO ` + offsets + ` (segment_id, key, offset) VALUES (?, ?, ?) USING TTL ?`,
			setStatics:   `UPDATE ` + offsets + ` USING TTL ? SET next_offset = ?, retry_count = ?` + pk,
			deleteEntry:  `DELETE FROM ` + offsets + pk + ` AND offset = ?`,
			deleteBefore: `DELETE FROM ` + offsets + pk + ` AND offset < ?`,
			deleteAfter:  `DELETE FROM ` + offsets + pk + ` AND offset > ?`,
			deleteKey:    `DELETE FROM ` + offsets + pk,
		},
		timers: queueStatements{
			selectHead:   `SELECT DISTINCT segment_id, key, next_timer, retry_count FROM ` + timers + pk,
			selectFirst:  `SELECT original_time, span FROM ` + timers + pk + ` LIMIT 1`,
			selectAfter:  `SELECT original_time, span FROM ` + timers + pk + ` AND original_time > ? LIMIT 1`,
			selectAll:    `SELECT original_time FROM ` + timers + pk,
			insertFirst:  `INSERT INTO ` + timers + ` (segment_id, key, original_time, span, retry_count, next_timer) VALUES (?, ?, ?, ?, ?, ?) USING TTL ?`,
			insertEntry:  `INSERT INTO ` + timers + ` (segment_id, key, original_time, span) VALUES (?, ?, ?, ?) USING TTL ?`,
			setStatics:   `UPDATE ` + timers + ` USING TTL ? SET next_timer = ?, retry_count = ?` + pk,
			deleteEntry:  `DELETE FROM ` + timers + pk + ` AND original_time = ?`,
			deleteBefore: `DELETE FROM ` + timers + pk + ` AND original_time < ?`,
			deleteAfter:  `DELETE FROM ` + timers + pk + ` AND original_time > ?`,
			deleteKey:    `DELETE FROM ` + timers + pk,
		},
	}
}
