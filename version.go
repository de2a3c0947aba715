// Package prosody holds what the whole module shares: its version.
//
// The consumer, producer and the rest are in the packages under core/ (the
// client is core/client); the C library is built from capi/.
package prosody

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var version string

// Version is the release of this module, the Python package and the npm
// package, from the VERSION file (scripts/dist version sets it everywhere).
var Version = strings.TrimSpace(version)
