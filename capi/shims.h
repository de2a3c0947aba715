/*
 * shims.h - internal declarations shared by the cgo preambles and shims.c.
 * Not installed: hosts use include/prosody.h only.
 */
#ifndef PROSODY_SHIMS_H
#define PROSODY_SHIMS_H

#include <stdlib.h>
#include "prosody.h"

/* Trampolines: Go cannot call C function pointers, so it calls these. */
void prosodyInt_call_completion(prosody_completion_fn fn, uintptr_t user_data, int status,
                                const char *message);
void prosodyInt_call_times(prosody_times_fn fn, uintptr_t user_data, int status, const int64_t *times_ms,
                           size_t count, const char *message);
void prosodyInt_call_state(prosody_state_fn fn, uintptr_t user_data, int status, const prosody_state_item *items,
                           size_t n, uint64_t number, const char *message);
void prosodyInt_call_notify(prosody_notify_fn fn, uintptr_t user_data);
/* What an on_event call reads and writes besides the event's bytes: the
 * event's view and the callback's message pointer. It sits at the front of
 * the event's C buffer (capi/direct.go). */
typedef struct prosodyInt_call_frame {
  prosody_event view;
  const char *message;
} prosodyInt_call_frame;

/* Calls fn (a prosody_event_fn) for the frame at the address frame. Both
 * cross as integers: they point to C memory, and cgo's check of every
 * pointer argument costs about as much as the call. */
int32_t prosodyInt_call_event(uintptr_t fn, uintptr_t user_data, uintptr_t frame);
void prosodyInt_call_log(prosody_log_fn fn, uintptr_t user_data, int32_t level, int64_t time_ms,
                         const char *target, const char *message, const char *attributes);

#ifdef __linux__
/* A new non-blocking, close-on-exec eventfd, or -1 with errno set. */
int prosodyInt_eventfd(void);
#endif
char *prosodyInt_prosody_env(void);
/* user_data crosses into Go as an integer: hosts pass small integers as
 * user_data, which the Go runtime would take for bad pointers. */
uintptr_t prosodyInt_handler_user_data(const prosody_handler_config *h);

#endif
