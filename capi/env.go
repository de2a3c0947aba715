package main

/*
#include <stdlib.h>
#include "shims.h"
*/
import "C"

import (
	"os"
	"strings"
	"sync"
	"unsafe"
)

var envMu sync.Mutex

// syncEnv makes the Go runtime's view of the PROSODY_* and OTEL_*
// variables match the process environment. The runtime copies the environment once, when the
// library is loaded, but hosts load it lazily and change variables
// afterwards (os.environ in Python, process.env in Node); configuration
// must see what the host sees when it creates a client. Variables that
// differ are set (or unset) through the os package, which also writes the
// same value back to the C environment.
func syncEnv() {
	envMu.Lock()
	defer envMu.Unlock()
	raw := C.prosodyInt_prosody_env()
	current := map[string]string{}
	if raw != nil {
		for _, kv := range strings.Split(C.GoString(raw), "\n") {
			if name, value, ok := strings.Cut(kv, "="); ok {
				current[name] = value
			}
		}
		C.free(unsafe.Pointer(raw))
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := current[name]; !ok && (strings.HasPrefix(name, "PROSODY_") || strings.HasPrefix(name, "OTEL_")) {
			_ = os.Unsetenv(name)
		}
	}
	for name, value := range current {
		if v, ok := os.LookupEnv(name); !ok || v != value {
			_ = os.Setenv(name, value)
		}
	}
}
