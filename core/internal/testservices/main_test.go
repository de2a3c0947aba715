package testservices

import (
	"testing"

	"go.uber.org/goleak"
)

// Both client libraries must shut down completely once closed; a goroutine
// left behind here would show up as a leak in every integration test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, LeakOptions()...) }
