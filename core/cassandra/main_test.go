package cassandra

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// A closed Session must leave no gocql goroutine behind (pool fillers,
// control connection, event debouncers all stop on Close).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testservices.LeakOptions()...) }
