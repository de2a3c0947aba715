package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Workspace is a client's keyed-state directory (state_cache_dir), held
// with an exclusive lock for as long as the client lives, so that two
// live clients never share one. Prosody keeps no keyed-state data there:
// the committed state is in the store, an attempt's staged writes are in
// memory, and a write that a crash left half-applied is settled from the
// store's own record of it (statestore.Pending). The directory is locked
// so that a deployment that gives each client its own keeps that promise.
type Workspace struct {
	Dir  string
	lock *os.File
	temp bool // made by us, removed on release
}

// OpenWorkspace locks dir, or a new temporary directory when dir is "".
// A directory another live client holds is refused, naming the option.
func OpenWorkspace(dir string) (*Workspace, error) {
	w := &Workspace{Dir: dir}
	if dir == "" {
		d, err := os.MkdirTemp("", "prosody-state-")
		if err != nil {
			return nil, fmt.Errorf("state_cache_dir: creating a temporary directory: %w", err)
		}
		w.Dir, w.temp = d, true
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state_cache_dir: creating %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(w.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state_cache_dir: opening the lock in %s: %w", w.Dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state_cache_dir: %s is in use by another live client; give each client its own directory", w.Dir)
		}
		return nil, fmt.Errorf("state_cache_dir: locking %s: %w", w.Dir, err)
	}
	w.lock = f
	return w, nil
}

// Release unlocks the directory (and removes it if it was temporary).
func (w *Workspace) Release() {
	if w == nil || w.lock == nil {
		return
	}
	w.lock.Close() // closing the descriptor drops the flock
	w.lock = nil
	if w.temp {
		os.RemoveAll(w.Dir)
	}
}
