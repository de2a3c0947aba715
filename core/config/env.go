package config

import (
	"fmt"
	"reflect"

	"github.com/kelseyhightower/envconfig"
)

// envField receives one environment variable from envconfig and parses it
// with the kind of its option.
type envField[C any] struct {
	opt   *option[C]
	set   bool     // the variable exists (it may be empty)
	apply func(*C) // stores the parsed value
	err   error    // why the text could not be parsed
}

// Decode implements envconfig.Decoder. It never fails: envconfig stops at
// the first error, and we want to report every bad variable at once.
func (f *envField[C]) Decode(s string) error {
	f.set = true
	f.apply, f.err = f.opt.fromText(s)
	return nil
}

// readEnv reads the variables of an option table through envconfig.
//
// envconfig wants a struct with one tagged field per variable. Rather than
// writing the variable names down a second time, the struct type is built
// from the table: field i is a *envField tagged with the option's variable.
func readEnv[C any](opts []option[C]) ([]*envField[C], error) {
	var fields []reflect.StructField
	var targets []*envField[C]
	for i := range opts {
		if opts[i].env == "" {
			continue
		}
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("Option%d", i),
			Type: reflect.TypeFor[*envField[C]](),
			Tag:  reflect.StructTag(fmt.Sprintf("envconfig:%q", opts[i].env)),
		})
		targets = append(targets, &envField[C]{opt: &opts[i]})
	}
	spec := reflect.New(reflect.StructOf(fields)).Elem()
	for i, t := range targets {
		spec.Field(i).Set(reflect.ValueOf(t))
	}
	// The tags carry the full names, so no prefix is passed. (With a prefix,
	// envconfig would also fall back to the bare tag, e.g. MOCK.)
	if err := envconfig.Process("", spec.Addr().Interface()); err != nil {
		return nil, fmt.Errorf("config: reading the environment: %w", err)
	}
	return targets, nil
}
