package record

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAppendAndReadBack(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(filepath.Join(dir, "m.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{Kind: Handled, Member: "m", Time: 1, Partition: 2, Offset: 3, Key: "k", Seq: 4, ID: "i", Count: 4},
		{Kind: Fired, Member: "m", Time: 2, Key: "k", At: 10},
	}
	for _, r := range want {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
}

// A line without its newline can only come from a write split in two,
// which the one-write append rules out: the reader says so rather than
// dropping it.
func TestATornLineIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.log"), []byte(`{"k":"handled"}`+"\n"+`{"k":"hand`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(dir); err == nil || !strings.Contains(err.Error(), "torn") {
		t.Fatalf("err = %v, want a torn write", err)
	}
}
