package admin

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// Every client must stop all of its goroutines on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testservices.LeakOptions()...) }
