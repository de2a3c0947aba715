//go:build capitest

package main

// C helpers for the test hooks, in a file without //export (whose C
// preamble may then define functions).

/*
#include "shims.h"
static void prosodyTest_set_user_data(prosody_handler_config *h, uintptr_t ud) { h->user_data = (void *)ud; }
*/
import "C"

func setTestUserData(h *C.prosody_handler_config, ud uintptr) {
	C.prosodyTest_set_user_data(h, C.uintptr_t(ud))
}
