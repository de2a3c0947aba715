package filter

import "testing"

func TestEventTypesAllowed(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		typ      string
		hasType  bool
		want     bool
	}{
		{"nil list allows all", nil, "anything", true, true},
		{"empty list allows all", []string{}, "anything", true, true},
		{"empty prefix matches all", []string{""}, "anything", true, true},
		{"empty prefix matches empty type", []string{""}, "", true, true},
		{"exact prefix", []string{"user."}, "user.created", true, true},
		{"second prefix", []string{"user.", "account."}, "account.deleted", true, true},
		{"type equals prefix", []string{"user."}, "user.", true, true},
		{"not anchored elsewhere", []string{"user."}, "admin.user.created", true, false},
		{"not anchored elsewhere 2", []string{"account."}, "my.account.deleted", true, false},
		{"no prefix matches", []string{"user.", "account."}, "notification", true, false},
		{"no separator logic", []string{"user"}, "username.x", true, true},
		{"case-sensitive", []string{"user."}, "User.created", true, false},
		{"type shorter than prefix", []string{"user."}, "user", true, false},
		{"empty type with list", []string{"user."}, "", true, false},
		{"no type is always allowed", []string{"user."}, "", false, true},
		{"no type ignores value", []string{"user."}, "admin", false, true},
		{"multibyte prefix", []string{"über."}, "über.x", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewEventTypes(tt.prefixes).Allowed(tt.typ, tt.hasType); got != tt.want {
				t.Errorf("NewEventTypes(%q).Allowed(%q, %v) = %v, want %v",
					tt.prefixes, tt.typ, tt.hasType, got, tt.want)
			}
		})
	}
}

func TestEventTypesEnabled(t *testing.T) {
	tests := []struct {
		prefixes []string
		want     bool
	}{{nil, false}, {[]string{}, false}, {[]string{""}, true}, {[]string{"a"}, true}}
	for _, tt := range tests {
		if got := NewEventTypes(tt.prefixes).Enabled(); got != tt.want {
			t.Errorf("NewEventTypes(%q).Enabled() = %v, want %v", tt.prefixes, got, tt.want)
		}
	}
	if !(EventTypes{}).Allowed("x", true) {
		t.Error("zero EventTypes must allow everything")
	}
}

func TestEventTypesCopiesPrefixes(t *testing.T) {
	prefixes := []string{"user."}
	e := NewEventTypes(prefixes)
	prefixes[0] = "admin."
	if !e.Allowed("user.created", true) || e.Allowed("admin.x", true) {
		t.Error("filter changed after the caller modified its slice")
	}
}
