package statestore

// statements holds the CQL text of every operation, built once per store so
// that gocql's per-connection prepared-statement cache is hit every time.
type statements struct {
	selectCollections, registerCollection string

	selectRoute, insertRoute, updateRoute, deleteRoute string

	selectLease, setLease string

	// selectRow reads one row with the seconds it has left to live.
	selectRow string
	// selectRows reads many rows of one collection (map keys, IN ?).
	selectRows string
	// mapScan is indexed by [dir][hasAfter][keysOnly].
	mapScan [2][2][2]string
	// dequeSlots is indexed by dir.
	dequeSlots [2]string

	insertRow                                string
	deleteCollection, deleteRow, deleteRange string

	insertPending, selectPending, deletePending string
}

func newStatements(ks string) statements {
	entries := ks + ".state_entries"
	const pk = ` WHERE namespace = ? AND key = ? AND collection = ?`
	const desc = ` ORDER BY collection DESC, item DESC`
	q := statements{
		selectCollections:  `SELECT name, kind, payload FROM ` + ks + `.state_collections WHERE namespace = ?`,
		registerCollection: `INSERT INTO ` + ks + `.state_collections (namespace, name, kind, payload) VALUES (?, ?, ?, ?) IF NOT EXISTS`,

		selectRoute: `SELECT namespace, topic, kind, payload FROM ` + ks + `.state_routes WHERE subsystem = ? AND collection = ?`,
		insertRoute: `INSERT INTO ` + ks + `.state_routes (subsystem, collection, namespace, topic, kind, payload) VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS`,
		updateRoute: `UPDATE ` + ks + `.state_routes SET namespace = ?, topic = ?, kind = ?, payload = ? WHERE subsystem = ? AND collection = ? IF EXISTS`,
		deleteRoute: `DELETE FROM ` + ks + `.state_routes WHERE subsystem = ? AND collection = ? IF namespace = ?`,

		selectLease: `SELECT high FROM ` + ks + `.state_leases WHERE namespace = ? AND source = ?`,
		setLease:    `INSERT INTO ` + ks + `.state_leases (namespace, source, high) VALUES (?, ?, ?) USING TIMESTAMP ?`,

		selectRow:  `SELECT value, TTL(value) FROM ` + entries + pk + ` AND item = ?`,
		selectRows: `SELECT item, value, TTL(value) FROM ` + entries + pk + ` AND item IN ?`,

		insertRow:        `INSERT INTO ` + entries + ` (namespace, key, collection, item, value) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ? AND TTL ?`,
		deleteCollection: `DELETE FROM ` + entries + ` USING TIMESTAMP ?` + pk,
		deleteRow:        `DELETE FROM ` + entries + ` USING TIMESTAMP ?` + pk + ` AND item = ?`,
		deleteRange:      `DELETE FROM ` + entries + ` USING TIMESTAMP ?` + pk + ` AND item >= ? AND item < ?`,

		insertPending: `INSERT INTO ` + ks + `.state_pending (namespace, id, chunk, data) VALUES (?, ?, ?, ?)`,
		selectPending: `SELECT id, chunk, data FROM ` + ks + `.state_pending WHERE namespace = ?`,
		deletePending: `DELETE FROM ` + ks + `.state_pending WHERE namespace = ? AND id = ?`,
	}
	for dir, order := range [2]string{Forward: ``, Backward: desc} {
		cmp := [2]string{Forward: ` AND item > ?`, Backward: ` AND item < ?`}[dir]
		for hasAfter, where := range [2]string{``, cmp} {
			for keysOnly, cols := range [2]string{`item, value`, `item`} {
				q.mapScan[dir][hasAfter][keysOnly] = `SELECT ` + cols + ` FROM ` + entries + pk + where + order + ` LIMIT ?`
			}
		}
		q.dequeSlots[dir] = `SELECT item, value FROM ` + entries + pk + ` AND item >= ? AND item < ?` + order + ` LIMIT ?`
	}
	return q
}
