package config

import (
	"reflect"
	"testing"
	"time"
)

var topicCases = []optionCase{
	{name: "name", def: "",
		env: "env-topic", envWant: "env-topic",
		explicit: `"json-topic"`, explicitWant: "json-topic",
		bad: `""`, wantErr: `name: must not be empty, got ""`,
		badEnv: text(""), wantEnvErr: "must not be empty"},
	{name: "partition_count", def: None[int](),
		env: "12", envWant: Some(12),
		explicit: `3`, explicitWant: Some(3),
		bad: `0`, wantErr: "must be within [1, 65535], got 0",
		badEnv: text("many"), wantEnvErr: "must be a whole number"},
	{name: "replication_factor", def: None[int](),
		env: "3", envWant: Some(3),
		explicit: `"none"`, explicitWant: None[int](),
		bad: `65536`, wantErr: "must be within [1, 65535], got 65536",
		badEnv: text("0"), wantEnvErr: "must be within [1, 65535], got 0"},
	{name: "cleanup_policy", def: "",
		env: "compact", envWant: "compact",
		explicit: `"compact,delete"`, explicitWant: "compact,delete",
		bad: `["delete"]`, wantErr: "must be a string"},
	{name: "retention", def: None[time.Duration](),
		env: "7d", envWant: Some(7 * 24 * time.Hour),
		explicit: `3600`, explicitWant: Some(time.Hour),
		bad: `0`, wantErr: "must be greater than 0, got 0s",
		badEnv: text("2h 30"), wantEnvErr: "a unit must follow 30"},
}

func TestEveryTopicOption(t *testing.T) {
	for _, tc := range topicCases {
		t.Run(tc.name, func(t *testing.T) {
			o := findOption(t, topicOptions, tc.name)
			base := map[string]string{"name": `"orders"`}
			if tc.name == "name" {
				base = map[string]string{}
			}
			check := func(label string, cfg *TopicConfig, want any) {
				t.Helper()
				if got := o.value(cfg); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %#v, want %#v", label, got, want)
				}
			}

			clearEnv(t)
			var d TopicConfig
			o.reset(&d)
			check("default", &d, tc.def)
			if tc.name != "name" {
				cfg, err := TopicFromJSON(options(t, base))
				if err != nil {
					t.Fatal(err)
				}
				check("loaded default", cfg, tc.def)
			}

			t.Setenv(o.env, tc.env)
			cfg, err := TopicFromJSON(options(t, base))
			if err != nil {
				t.Fatal(err)
			}
			check("environment", cfg, tc.envWant)

			raw := merge(base, map[string]string{tc.name: tc.explicit})
			if cfg, err = TopicFromJSON(options(t, raw)); err != nil {
				t.Fatal(err)
			}
			check("JSON beats environment", cfg, tc.explicitWant)

			setters := []func(*TopicConfig){explicitSetter(t, o, tc.explicit)}
			if tc.name != "name" {
				setters = append(setters, func(c *TopicConfig) { c.Name = "orders" })
			}
			if cfg, err = LoadTopic(setters...); err != nil {
				t.Fatal(err)
			}
			check("Go beats environment", cfg, tc.explicitWant)

			clearEnv(t)
			_, err = TopicFromJSON(options(t, merge(base, map[string]string{tc.name: tc.bad})))
			requireOptionError(t, err, tc.name, tc.wantErr)
			if tc.badEnv != nil {
				t.Setenv(o.env, *tc.badEnv)
				_, err = TopicFromJSON(options(t, base))
				requireOptionError(t, err, tc.name, tc.wantEnvErr, "(from "+o.env+")")
			}
		})
	}
}

func TestTopicTableIsComplete(t *testing.T) {
	cases := make(map[string]int)
	for _, tc := range topicCases {
		cases[tc.name]++
	}
	for _, o := range topicOptions {
		if cases[o.name] != 1 {
			t.Errorf("topic option %s has %d rows in topicCases, want 1", o.name, cases[o.name])
		}
		delete(cases, o.name)
	}
	for name := range cases {
		t.Errorf("topicCases has a row for unknown option %s", name)
	}
	exported := 0
	for f := range reflect.TypeFor[TopicConfig]().Fields() {
		if f.IsExported() {
			exported++
		}
	}
	if exported != len(topicOptions) {
		t.Errorf("TopicConfig has %d exported fields but %d options are registered", exported, len(topicOptions))
	}
}

func TestTopicUnknownKey(t *testing.T) {
	clearEnv(t)
	_, err := TopicFromJSON([]byte(`{"name": "t", "partitions": 3}`))
	requireOptionError(t, err, "partitions", "partitions: unknown option")
}
