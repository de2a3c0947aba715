// Package probe serves the consumer's Kubernetes-style health endpoints
// (/readyz, /livez; spec §3.11) and provides the heartbeats from which the
// consumer decides whether anything has stalled (spec §3.10).
//
// The routes, status codes and bodies are observable by orchestration
// tooling and must match the original byte for byte, so they live in one
// place (handler.go) with the exact strings as constants.
package probe
