// Package readmecheck holds the test that keeps README.md's Quick Start
// code identical to the example programs `make demo` runs: a README code
// block preceded by a comment naming a file,
//
//	<!-- example: examples/go/quickstart/main.go -->
//
// must be exactly that file, and the file must be run by `make demo`.
package readmecheck
