package cassandra

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
)

func TestConnectCreatesKeyspaceAndRecordsMigrations(t *testing.T) {
	o, ctx, s := connectFresh(t)

	var class string
	var replication map[string]string
	if err := s.Query(ctx, `SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, o.Keyspace).
		Scan(&replication); err != nil {
		t.Fatalf("read keyspace: %v", err)
	}
	class = replication["class"]
	if !strings.HasSuffix(class, "SimpleStrategy") || replication["replication_factor"] != "1" {
		t.Fatalf("replication = %v, want SimpleStrategy with RF 1", replication)
	}

	want, err := loadMigrations(migrationFiles, "migrations")
	if err != nil || len(want) == 0 {
		t.Fatalf("loadMigrations: %v (%d files)", err, len(want))
	}
	recorded := readRecorded(t, s)
	if len(recorded) != len(want) {
		t.Fatalf("recorded %d migrations, want %d: %v", len(recorded), len(want), recorded)
	}
	for _, m := range want {
		r, ok := recorded[m.name]
		if !ok || r.checksum != m.checksum || len(r.checksum) != 64 || r.appliedAt.IsZero() {
			t.Errorf("migration %s recorded as %+v, want checksum %s", m.name, r, m.checksum)
		}
	}

	for _, table := range []string{"timer_segments", "timer_typed_slabs", "timer_typed_keys", "deduplication",
		"deferred_segments", "deferred_offsets", "deferred_timers", "locks", "schema_migrations"} {
		var name string
		if err := s.Query(ctx, `SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`,
			o.Keyspace, table).Scan(&name); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}

	// A second Connect finds everything applied and re-applies nothing.
	s2, err := Connect(ctx, o)
	if err != nil {
		t.Fatalf("second Connect: %v", err)
	}
	s2.Close()
	again := readRecorded(t, s)
	for name, r := range recorded {
		if !again[name].appliedAt.Equal(r.appliedAt) {
			t.Errorf("migration %s applied again: %v then %v", name, r.appliedAt, again[name].appliedAt)
		}
	}
}

func TestTimerTablesUseZstdAndUCS(t *testing.T) {
	o, ctx, s := connectFresh(t)
	tests := []struct {
		table   string
		scaling string
		gcGrace int
	}{
		{"timer_segments", "L4", 864000},
		{"timer_typed_slabs", "T4", 864000},
		{"timer_typed_keys", "L4", 864000},
		{"deduplication", "T4", 86400},
		{"deferred_segments", "L10", 864000},
		{"deferred_offsets", "L10", 864000},
		{"deferred_timers", "L10", 864000},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			var compression, compaction map[string]string
			var gcGrace int
			if err := s.Query(ctx, `SELECT compression, compaction, gc_grace_seconds FROM system_schema.tables
				WHERE keyspace_name = ? AND table_name = ?`, o.Keyspace, tt.table).Scan(&compression, &compaction, &gcGrace); err != nil {
				t.Fatalf("read options: %v", err)
			}
			if !strings.HasSuffix(compression["class"], "ZstdCompressor") {
				t.Errorf("compression = %v, want ZstdCompressor", compression)
			}
			if !strings.HasSuffix(compaction["class"], "UnifiedCompactionStrategy") || compaction["scaling_parameters"] != tt.scaling {
				t.Errorf("compaction = %v, want UCS %s", compaction, tt.scaling)
			}
			if gcGrace != tt.gcGrace {
				t.Errorf("gc_grace_seconds = %d, want %d", gcGrace, tt.gcGrace)
			}
		})
	}
}

func TestConcurrentConnectsApplyEachMigrationOnce(t *testing.T) {
	o := freshKeyspace(t)
	ctx := testContext(t)
	var applied atomic.Int64
	o.Logger = slog.New(countingHandler{msg: "applied Cassandra migration", count: &applied})

	const clients = 4
	sessions := make([]*Session, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { sessions[i], errs[i] = Connect(ctx, o) })
	}
	wg.Wait()
	for i, s := range sessions {
		if errs[i] != nil {
			t.Errorf("client %d: %v", i, errs[i])
			continue
		}
		defer s.Close()
	}
	if t.Failed() {
		t.FailNow()
	}
	want, _ := loadMigrations(migrationFiles, "migrations")
	if got := applied.Load(); got != int64(len(want)) {
		t.Fatalf("migrations executed %d times across %d clients, want %d (once each)", got, clients, len(want))
	}
	if got := len(readRecorded(t, sessions[0])); got != len(want) {
		t.Fatalf("recorded %d migrations, want %d", got, len(want))
	}
}

func TestChangedMigrationIsRefusedByName(t *testing.T) {
	o, ctx, s := connectFresh(t)
	const file = "0001_timer_tables.cql"
	if err := s.Query(ctx, `UPDATE `+o.Keyspace+`.schema_migrations SET checksum = 'deadbeef' WHERE filename = ?`, file).Exec(); err != nil {
		t.Fatalf("tamper: %v", err)
	}
	_, err := Connect(ctx, o)
	if err == nil {
		t.Fatal("Connect accepted a migration whose recorded checksum differs")
	}
	if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("error %q does not name the file and the checksum", err)
	}
	if !fault.IsTerminal(err) {
		t.Fatalf("error class = %v, want terminal", fault.ClassOf(err))
	}
}

// New files are applied in filename order, after the ones already recorded.
func TestMigrationsApplyInFilenameOrder(t *testing.T) {
	o, ctx, s := connectFresh(t)
	// 0002 depends on 0001: out of order it would fail.
	fsys := fstest.MapFS{
		"m/0002_b.cql": {Data: []byte("-- second\nINSERT INTO {{KEYSPACE}}.order_test (k, v) VALUES (1, 'b');\n")},
		"m/0001_a.cql": {Data: []byte("CREATE TABLE IF NOT EXISTS {{KEYSPACE}}.order_test (k int PRIMARY KEY, v text);\nINSERT INTO {{KEYSPACE}}.order_test (k, v) VALUES (1, 'a');")},
	}
	ms, err := loadMigrations(fsys, "m")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(ms) != 2 || ms[0].name != "0001_a.cql" || len(ms[0].statements(o.Keyspace)) != 2 {
		t.Fatalf("loaded %+v", ms)
	}
	if err := s.applyMigrations(ctx, ms); err != nil {
		t.Fatalf("apply: %v", err)
	}
	var v string
	if err := s.Query(ctx, `SELECT v FROM `+o.Keyspace+`.order_test WHERE k = 1`).Scan(&v); err != nil || v != "b" {
		t.Fatalf("v = %q, %v; want b (0002 after 0001)", v, err)
	}
}

func TestLockIsExclusiveAndReleased(t *testing.T) {
	o, ctx, s := connectFresh(t)
	release, err := s.acquireLock(ctx, "test")
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	short, cancel := contextWithTimeout(ctx, 500*time.Millisecond)
	_, err = s.acquireLock(short, "test")
	cancel()
	if err == nil || !errors.Is(err, short.Err()) {
		t.Fatalf("second acquire while held: %v, want the context error", err)
	}
	var ttl int
	if err := s.Query(ctx, `SELECT TTL(owner_id) FROM `+o.Keyspace+`.locks WHERE lock_name = 'test'`).Scan(&ttl); err != nil || ttl <= 0 || ttl > 600 {
		t.Fatalf("lock TTL = %d, %v; want (0, 600]", ttl, err)
	}
	release()
	release2, err := s.acquireLock(ctx, "test")
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	release2()
}

type recordedMigration struct {
	checksum  string
	appliedAt time.Time
	elapsedMS int64
}

func readRecorded(t *testing.T, s *Session) map[string]recordedMigration {
	t.Helper()
	out := map[string]recordedMigration{}
	iter := s.Query(testContext(t), `SELECT filename, checksum, applied_at, execution_time_ms FROM `+s.Keyspace()+`.schema_migrations`).Iter()
	var name string
	var r recordedMigration
	for iter.Scan(&name, &r.checksum, &r.appliedAt, &r.elapsedMS) {
		out[name] = r
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	return out
}
