package config

import (
	"errors"
	"maps"
	"reflect"
	"slices"
)

// Load builds a Config from the defaults, then the PROSODY_* environment
// variables, then the explicit settings, and validates the result.
//
// Explicit settings are functions that change the Config; whatever they
// change wins over the environment:
//
//	cfg, err := config.Load(func(c *config.Config) {
//		c.BootstrapServers = []string{"localhost:9092"}
//		c.ProbePort = config.None[int]() // no probe server
//	})
//
// The functions run on the configuration already resolved from defaults and
// environment, and an option counts as explicitly set when they change its
// value. Assigning the value it already has is therefore not noticed, which
// matters only in one corner: if that option's variable could not be parsed,
// the variable is still reported.
//
// On failure the error joins one *OptionError per problem.
func Load(explicit ...func(*Config)) (*Config, error) {
	return build(nil, explicit)
}

// FromJSON is Load with the explicit settings given as one JSON object keyed
// by snake_case option names, as the C ABI passes them. See the package
// documentation for the value syntax.
func FromJSON(data []byte) (*Config, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	return build(obj, nil)
}

func build(obj map[string]any, explicit []func(*Config)) (*Config, error) {
	var c Config
	envVars, errs := resolve(configOptions, &c, obj, explicit)
	c.envVars = envVars
	return finish(&c, errs, c.validate)
}

// resolve fills c from the three sources, lowest precedence first. It
// returns which options kept an environment value and the parse errors.
func resolve[C any](opts []option[C], c *C, obj map[string]any, explicit []func(*C)) (map[string]string, []error) {
	for _, o := range opts {
		o.reset(c)
	}
	envVars := make(map[string]string)
	envErrs := make(map[string]error) // dropped if the option is then set explicitly

	fields, err := readEnv(opts)
	if err != nil {
		return envVars, []error{err}
	}
	for _, f := range fields {
		switch {
		case !f.set:
		case f.err != nil:
			envErrs[f.opt.name] = optionError(f.opt.name, f.opt.env, f.err)
		default:
			f.apply(c)
			envVars[f.opt.name] = f.opt.env
		}
	}

	var errs []error
	explicitlySet := func(name string) {
		delete(envVars, name)
		delete(envErrs, name)
	}
	known := make(map[string]bool)
	for _, o := range opts {
		if o.envOnly {
			continue
		}
		known[o.name] = true
		raw, ok := obj[o.name]
		if !ok {
			continue
		}
		apply, err := o.fromJSON(raw)
		switch {
		case err != nil:
			explicitlySet(o.name)
			errs = appendFlat(errs, optionError(o.name, "", err))
		case apply != nil:
			explicitlySet(o.name)
			apply(c)
		}
		// Otherwise the value was null: not given, so the environment or
		// the default stays.
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		if !known[key] {
			errs = append(errs, &OptionError{Option: userKey(key), Message: "unknown option"})
		}
	}

	// A Go setter counts as explicit for the options whose value it changed.
	before := make([]any, len(opts))
	for i, o := range opts {
		before[i] = o.value(c)
	}
	for _, set := range explicit {
		set(c)
	}
	for i, o := range opts {
		if !reflect.DeepEqual(before[i], o.value(c)) {
			explicitlySet(o.name)
		}
	}

	var all []error
	for _, o := range opts {
		if err := envErrs[o.name]; err != nil {
			all = append(all, err)
		}
	}
	return envVars, append(all, errs...)
}

// finish validates c and returns it, or every parse and validation error
// joined. A validation error for an option that already failed to parse is
// dropped: it would describe the fallback value, not the one the user gave.
func finish[C any](c *C, parseErrs []error, validate func() []error) (*C, error) {
	failed := make(map[string]bool)
	for _, err := range parseErrs {
		if oe, ok := err.(*OptionError); ok {
			failed[oe.Option] = true
		}
	}
	errs := parseErrs
	for _, err := range validate() {
		if oe, ok := err.(*OptionError); !ok || !failed[oe.Option] && !readsFailed(oe.Option, failed) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// crossRules names the options a rule between options reads, by the option
// its error names. A value that failed to parse leaves its default behind,
// so a rule reading it would report a problem the user does not have (mock
// given as "yes" would make Cassandra look required).
var crossRules = map[string][]string{
	"cassandra_nodes": {"mock", "group_id", "subscribed_topics"},
	"failure_topic":   {"mode", "group_id", "subscribed_topics"},
	"defer_max_delay": {"defer_base"},
	"max_retry_delay": {"retry_base"},
	"cassandra_rack":  {"cassandra_datacenter"},
	// The security rules (security.go) read the protocol and mechanism.
	"sasl_mechanism":                                {"security_protocol"},
	"sasl_username":                                 {"security_protocol", "sasl_mechanism"},
	"sasl_password":                                 {"security_protocol", "sasl_mechanism"},
	"sasl_oauthbearer_token_file":                   {"security_protocol", "sasl_mechanism"},
	"ssl_ca_location":                               {"security_protocol"},
	"ssl_certificate_location":                      {"security_protocol"},
	"ssl_key_location":                              {"security_protocol"},
	"ssl_server_name":                               {"security_protocol"},
	"enable_ssl_certificate_verification":           {"security_protocol"},
	"cassandra_ssl_ca_location":                     {"cassandra_ssl_enabled"},
	"cassandra_ssl_certificate_location":            {"cassandra_ssl_enabled"},
	"cassandra_ssl_key_location":                    {"cassandra_ssl_enabled"},
	"cassandra_ssl_server_name":                     {"cassandra_ssl_enabled"},
	"cassandra_enable_ssl_certificate_verification": {"cassandra_ssl_enabled"},
}

// readsFailed reports whether option's rules between options read one that
// failed to parse.
func readsFailed(option string, failed map[string]bool) bool {
	for _, dep := range crossRules[option] {
		if failed[dep] {
			return true
		}
	}
	return false
}

// optionError names the option (and variable) in a parse error. Errors that
// already name their own option, such as those of state_collections entries,
// are passed through.
func optionError(name, env string, err error) error {
	var oe *OptionError
	if errors.As(err, &oe) {
		return err
	}
	return &OptionError{Option: name, EnvVar: env, Message: err.Error(), Err: err}
}

// appendFlat appends err, or the errors it joins, so that callers of Load see
// a flat list of *OptionError.
func appendFlat(errs []error, err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return append(errs, joined.Unwrap()...)
	}
	return append(errs, err)
}
