package statestore

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// Sessions opened by the Cassandra tests, and the caches' goroutines,
// must be fully closed by the end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testservices.LeakOptions()...) }
