package fetch

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testservices.LeakOptions()...) }
