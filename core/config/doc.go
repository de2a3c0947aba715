// Package config holds the settings of a Prosody client, reads them from
// their three sources and checks them.
//
// # Sources and precedence
//
// Each option is resolved on its own. A value given explicitly (from Go with
// Load, or as JSON with FromJSON) wins; an option not given explicitly takes
// its PROSODY_* environment variable if that exists; otherwise it keeps its
// default. In JSON, null counts as "not given", with one exception:
// probe_port null turns the probe server off. Environment variables are read
// through envconfig; a bad variable is only an error if no explicit value
// replaces it.
//
// # Value syntax
//
// Durations in the environment are written as the original Rust
// implementation reads them: whole numbers with units, several pairs allowed,
// as in "100ms", "30s", "2h 30m", "1h30m", "7d" or "1y". Units are ns, us, ms,
// s, m, h, d, w, M (30.44 days) and y (365.25 days), and their long forms
// such as "secs", "minutes", "hours" or "months". A number without a unit is
// an error. ParseDuration implements this. In JSON a duration is either a
// number of seconds (fractions allowed) or such a string.
//
// Lists are comma-separated in the environment; items are trimmed and empty
// items dropped. JSON accepts an array of strings or the same comma-separated
// form. Booleans are true or false, in any case. JSON integers must be whole
// numbers.
//
// The word "none", in any case, clears an optional setting: probe_port
// (the probe server is off), timeout (back to 4/5 of stall_threshold) and
// send_timeout (sends are not bounded).
//
// # Errors
//
// Loading and validation report every problem at once, joined with
// errors.Join. Each is an *OptionError reading "<option>: <rule>, got
// <value>", followed by "(from PROSODY_...)" when the value came from the
// environment. The keyed-state messages keep the fixed wording the language
// bindings document. Unknown JSON keys are errors. A password
// (sasl_password, cassandra_password) is never the <value>: its errors say
// what is allowed only.
//
// # Security
//
// The Kafka security options keep librdkafka's names (security_protocol,
// sasl_mechanism, sasl_username, sasl_password, ssl_ca_location, ...) and
// the Cassandra TLS options are those with a cassandra_ prefix; the rules
// between them are in security.go. Passwords are secret.Secret values,
// which print and marshal as "[redacted]".
//
// # Optional values
//
// Settings whose absence means something (a disabled probe, an unbounded
// send, a handler timeout derived from the stall threshold) are Optional
// values; HandlerTimeout and SourceSystemOrGroup resolve the derived
// defaults.
package config
