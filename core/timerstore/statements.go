package timerstore

// statements holds the CQL text of every operation, built once per store so
// that gocql's per-connection prepared-statement cache is hit every time.
type statements struct {
	selectSegment, insertSegment, updateSlabSize, updateVersion string
	insertSlab, selectSlabs, deleteSlab                         string
	insertSlabTrigger, selectSlabTriggers, selectSlabTypeKeys   string
	deleteSlabTrigger, deleteSlabPartition                      string
	selectKey, insertKeyRow, deleteKeyRow, deleteKeyType        string
	setKeyState, deleteKeyState                                 string
}

func newStatements(ks string) statements {
	segments := ks + ".timer_segments"
	slabs := ks + ".timer_typed_slabs"
	keys := ks + ".timer_typed_keys"
	return statements{
		selectSegment:  `SELECT name, slab_size, version FROM ` + segments + ` WHERE id = ? LIMIT 1`,
		insertSegment:  `INSERT INTO ` + segments + ` (id, name, slab_size, version) VALUES (?, ?, ?, ?)`,
		updateSlabSize: `UPDATE ` + segments + ` SET slab_size = ? WHERE id = ?`,
		updateVersion:  `UPDATE ` + segments + ` SET version = ? WHERE id = ?`,

		insertSlab:  `INSERT INTO ` + segments + ` (id, slab_id) VALUES (?, ?) USING TTL ?`,
		selectSlabs: `SELECT slab_id FROM ` + segments + ` WHERE id = ?`,
		deleteSlab:  `DELETE FROM ` + segments + ` WHERE id = ? AND slab_id = ?`,

		insertSlabTrigger: `INSERT INTO ` + slabs + ` (segment_id, slab_size, id, timer_type, key, time, span)
			VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?`,
		selectSlabTriggers: `SELECT timer_type, key, time, span FROM ` + slabs + `
			WHERE segment_id = ? AND slab_size = ? AND id = ?`,
		// timer_type is the first clustering column, so this reads one
		// contiguous slice of the slab partition.
		selectSlabTypeKeys: `SELECT key FROM ` + slabs + `
			WHERE segment_id = ? AND slab_size = ? AND id = ? AND timer_type = ?`,
		deleteSlabTrigger: `DELETE FROM ` + slabs + `
			WHERE segment_id = ? AND slab_size = ? AND id = ? AND timer_type = ? AND key = ? AND time = ?`,
		deleteSlabPartition: `DELETE FROM ` + slabs + ` WHERE segment_id = ? AND slab_size = ? AND id = ?`,

		selectKey:      `SELECT state, timer_type, time, span FROM ` + keys + ` WHERE segment_id = ? AND key = ?`,
		insertKeyRow:   `INSERT INTO ` + keys + ` (segment_id, key, timer_type, time, span) VALUES (?, ?, ?, ?, ?) USING TTL ?`,
		deleteKeyRow:   `DELETE FROM ` + keys + ` WHERE segment_id = ? AND key = ? AND timer_type = ? AND time = ?`,
		deleteKeyType:  `DELETE FROM ` + keys + ` WHERE segment_id = ? AND key = ? AND timer_type = ?`,
		setKeyState:    `UPDATE ` + keys + ` USING TTL ? SET state[?] = ? WHERE segment_id = ? AND key = ?`,
		deleteKeyState: `DELETE state[?] FROM ` + keys + ` WHERE segment_id = ? AND key = ?`,
	}
}
