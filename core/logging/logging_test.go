package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLevel(t *testing.T) {
	tests := []struct {
		directive string
		want      slog.Level
		wantErr   bool
	}{
		{"", slog.LevelInfo, false},
		{"info", slog.LevelInfo, false},
		{"debug", slog.LevelDebug, false},
		{"TRACE", slog.LevelDebug, false},
		{"warn,prosody=debug", slog.LevelDebug, false},
		{"prosody=error, debug", slog.LevelError, false},
		{"info,scylla=warn", slog.LevelInfo, false},
		{"prosody::consumer=warn", slog.LevelWarn, false},
		{"off", off, false},
		{"loud", 0, true},
		{"prosody=loud", 0, true},
	}
	for _, tt := range tests {
		got, err := Level(tt.directive)
		if (err != nil) != tt.wantErr {
			t.Fatalf("Level(%q) error = %v, want error %v", tt.directive, err, tt.wantErr)
		}
		if err == nil && got != tt.want {
			t.Errorf("Level(%q) = %v, want %v", tt.directive, got, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "PROSODY_LOG") {
			t.Errorf("error %q does not name PROSODY_LOG", err)
		}
	}
}

func TestNewFiltersByLevel(t *testing.T) {
	var buf bytes.Buffer
	log, err := New("warn", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("output %q", buf.String())
	}
}
