package cassandra

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/gocql/gocql"
)

const (
	// migrationLock names the lock row held while migrations run.
	migrationLock = "schema_migrations"
	// lockTTL bounds how long a crashed holder blocks everyone else.
	lockTTL = 10 * time.Minute
)

// acquireLock takes the named lock with a lightweight transaction, retrying
// with jittered exponential backoff until it is free or ctx ends. The row
// expires after lockTTL, so a holder that dies never blocks for longer. The
// returned function releases the lock only if we still own it.
func (s *Session) acquireLock(ctx context.Context, name string) (release func(), err error) {
	owner, err := gocql.RandomUUID()
	if err != nil {
		return nil, fmt.Errorf("cassandra: lock owner id: %w", err)
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("prosody-go host=%s pid=%d", host, os.Getpid())
	stmt := `INSERT INTO ` + s.keyspace + `.locks (lock_name, owner_id, acquired_at, expires_at, process_info)
		VALUES (?, ?, ?, ?, ?) IF NOT EXISTS USING TTL ` + fmt.Sprint(int(lockTTL.Seconds()))

	backoff := 50 * time.Millisecond
	for {
		now := time.Now()
		// Conditional statements get their timestamp from Paxos, so they
		// are issued without the session's client-side one.
		applied, err := s.gs.Query(stmt, name, owner, now, now.Add(lockTTL), info).
			WithContext(ctx).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, Classify(fmt.Errorf("cassandra: acquire lock %s: %w", name, err))
		}
		if applied {
			break
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cassandra: waiting for lock %s: %w", name, ctx.Err())
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 2*time.Second)
	}

	return func() {
		// Release even when ctx was cancelled meanwhile: otherwise the next
		// client waits for the TTL.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, err := s.gs.Query(`DELETE FROM `+s.keyspace+`.locks WHERE lock_name = ? IF owner_id = ?`, name, owner).
			WithContext(rctx).MapScanCAS(map[string]any{})
		if err != nil {
			s.logger.Warn("cannot release Cassandra lock; it expires by itself", "lock", name, "ttl", lockTTL, "error", err)
		}
	}, nil
}
