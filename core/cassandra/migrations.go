package cassandra

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
)

//go:embed migrations/*.cql
var migrationFiles embed.FS

// migration is one embedded CQL file.
type migration struct {
	name     string // file name, the key in schema_migrations
	text     string // file content as embedded
	checksum string // hex SHA-256 of text
}

// loadMigrations reads every *.cql file of fsys (in dir) in filename order.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("cassandra: read migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cql") {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("cassandra: read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		out = append(out, migration{name: e.Name(), text: string(b), checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// statements substitutes the keyspace and splits the file into statements.
// Lines starting with "--" are comments; statements end with ";". Migration
// files therefore must not put ";" inside string literals.
func (m migration) statements(keyspace string) []string {
	var b strings.Builder
	for _, line := range strings.Split(m.text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	text := strings.ReplaceAll(b.String(), "{{KEYSPACE}}", keyspace)
	var out []string
	for _, stmt := range strings.Split(text, ";") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			out = append(out, stmt)
		}
	}
	return out
}

// migrate creates the keyspace and the bookkeeping tables, then applies the
// embedded migrations that are not recorded yet.
func (s *Session) migrate(ctx context.Context) error {
	ms, err := loadMigrations(migrationFiles, "migrations")
	if err != nil {
		return fault.Terminal(err)
	}
	return s.applyMigrations(ctx, ms)
}

func (s *Session) applyMigrations(ctx context.Context, ms []migration) error {
	ks := s.keyspace
	bootstrap := []string{
		`CREATE KEYSPACE IF NOT EXISTS ` + ks +
			` WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
		`CREATE TABLE IF NOT EXISTS ` + ks + `.schema_migrations (
			filename text PRIMARY KEY,
			checksum text,
			applied_at timestamp,
			execution_time_ms bigint)`,
		`CREATE TABLE IF NOT EXISTS ` + ks + `.locks (
			lock_name text PRIMARY KEY,
			owner_id uuid,
			acquired_at timestamp,
			expires_at timestamp,
			process_info text)`,
	}
	for _, stmt := range bootstrap {
		if err := s.Query(ctx, stmt).Exec(); err != nil {
			return Classify(fmt.Errorf("cassandra: prepare keyspace %s: %w", ks, err))
		}
	}

	// Most starts find everything applied: check before taking the lock so
	// that a fleet restarting together does not queue on it.
	pending, err := s.pendingMigrations(ctx, ms)
	if err != nil || len(pending) == 0 {
		return err
	}

	release, err := s.acquireLock(ctx, migrationLock)
	if err != nil {
		return err
	}
	defer release()

	// Another client may have applied some while we waited for the lock.
	pending, err = s.pendingMigrations(ctx, ms)
	if err != nil {
		return err
	}
	for _, m := range pending {
		if err := s.applyMigration(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// pendingMigrations returns the migrations not yet recorded, and fails when a
// recorded one has a different checksum: the schema it created may not be
// the one this code expects, and guessing would risk the stored data.
func (s *Session) pendingMigrations(ctx context.Context, ms []migration) ([]migration, error) {
	applied := map[string]string{}
	iter := s.Query(ctx, `SELECT filename, checksum FROM `+s.keyspace+`.schema_migrations`).Iter()
	var name, sum string
	for iter.Scan(&name, &sum) {
		applied[name] = sum
	}
	if err := iter.Close(); err != nil {
		return nil, Classify(fmt.Errorf("cassandra: read schema_migrations: %w", err))
	}
	var pending []migration
	for _, m := range ms {
		got, ok := applied[m.name]
		switch {
		case !ok:
			pending = append(pending, m)
		case got != m.checksum:
			return nil, fault.Terminal(fmt.Errorf(
				"cassandra: migration %s was applied with checksum %s, but this build has %s: the file changed after it was applied",
				m.name, got, m.checksum))
		}
	}
	return pending, nil
}

func (s *Session) applyMigration(ctx context.Context, m migration) error {
	start := time.Now()
	for _, stmt := range m.statements(s.keyspace) {
		if err := s.Query(ctx, stmt).Exec(); err != nil {
			return Classify(fmt.Errorf("cassandra: migration %s: %w", m.name, err))
		}
	}
	elapsed := time.Since(start)
	err := s.Query(ctx, `INSERT INTO `+s.keyspace+`.schema_migrations
		(filename, checksum, applied_at, execution_time_ms) VALUES (?, ?, ?, ?)`,
		m.name, m.checksum, start, elapsed.Milliseconds()).Exec()
	if err != nil {
		return Classify(fmt.Errorf("cassandra: record migration %s: %w", m.name, err))
	}
	s.logger.Info("applied Cassandra migration", "keyspace", s.keyspace, "file", m.name, "duration", elapsed)
	return nil
}
