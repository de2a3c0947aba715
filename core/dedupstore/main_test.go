package dedupstore

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// Sessions and batch goroutines must be gone by the end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testservices.LeakOptions()...) }
