package config

import (
	"encoding/json"
	"testing"
)

// TestSchemaCoversEveryOption checks the schema document: it parses, lists
// every option of the table once with a type, and its Node names are
// unique.
func TestSchemaCoversEveryOption(t *testing.T) {
	var doc struct {
		Version int `json:"version"`
		Options []struct {
			Name    string         `json:"name"`
			Type    string         `json:"type"`
			Default any            `json:"default"`
			Limits  map[string]any `json:"limits"`
			Node    *struct {
				Name string `json:"name"`
				Unit string `json:"unit"`
			} `json:"node"`
		} `json:"options"`
	}
	if err := json.Unmarshal(SchemaJSON(), &doc); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if doc.Version != SchemaVersion || len(doc.Options) != len(configOptions) {
		t.Fatalf("version %d with %d options, want %d with %d", doc.Version, len(doc.Options), SchemaVersion, len(configOptions))
	}
	seen, nodeNames := map[string]bool{}, map[string]bool{}
	for _, o := range doc.Options {
		if o.Type == "" || seen[o.Name] {
			t.Errorf("option %q: type %q, listed twice: %v", o.Name, o.Type, seen[o.Name])
		}
		seen[o.Name] = true
		if o.Node != nil {
			if nodeNames[o.Node.Name] {
				t.Errorf("Node name %q given twice", o.Node.Name)
			}
			nodeNames[o.Node.Name] = true
			if o.Node.Unit != "" && o.Type != "duration" {
				t.Errorf("option %q has a Node unit but is a %s", o.Name, o.Type)
			}
		}
	}
	for name := range nodeOptions {
		if !seen[name] {
			t.Errorf("nodeOptions names %q, which is not an option", name)
		}
	}
	byName := map[string]map[string]any{}
	for _, o := range doc.Options {
		byName[o.Name] = o.Limits
	}
	for _, tt := range []struct {
		name, key string
		want      any
	}{
		{"max_concurrency", "min", 1.0},
		{"max_uncommitted", "max", 65535.0},
		{"defer_failure_threshold", "max", 1.0},
		{"slab_size", "min", 1.0},
		{"mode", "values", []any{"pipeline", "low-latency", "best-effort"}},
	} {
		got, _ := json.Marshal(byName[tt.name][tt.key])
		want, _ := json.Marshal(tt.want)
		if string(got) != string(want) {
			t.Errorf("%s limits[%s] = %s, want %s", tt.name, tt.key, got, want)
		}
	}
}
