package main

/*
#include "shims.h"
*/
import "C"

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"
)

// logSink is the host's log callback; nil means stderr.
type logSink struct {
	fn C.prosody_log_fn
	ud C.uintptr_t
}

var sink atomic.Pointer[logSink]

//export prosodyGo_set_log_callback
func prosodyGo_set_log_callback(fn C.prosody_log_fn, ud C.uintptr_t, errOut **C.char) (status C.int) {
	defer guard("prosody_set_log_callback", &status, errOut)
	if fn == nil {
		sink.Store(nil)
	} else {
		sink.Store(&logSink{fn: fn, ud: ud})
	}
	return C.PROSODY_OK
}

// newLogger returns a logger at level that forwards to the host's callback
// when one is set and writes text lines to stderr otherwise. The callback
// is looked up per record, so setting it later affects existing clients.
func newLogger(level slog.Level) *slog.Logger {
	text := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}).
		WithAttrs([]slog.Attr{slog.String("target", "prosody")})
	return slog.New(&hostHandler{level: level, text: text})
}

var root = newLogger(slog.LevelInfo)

// rootLogger logs what belongs to no client (recovered panics).
func rootLogger() *slog.Logger { return root }

type hostHandler struct {
	level  slog.Level
	text   slog.Handler // the stderr fallback, with the same attributes
	attrs  string       // logfmt of the attributes added by WithAttrs
	prefix string       // group prefix for keys, "a.b."
}

func (h *hostHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *hostHandler) Handle(ctx context.Context, r slog.Record) error {
	s := sink.Load()
	if s == nil {
		return h.text.Handle(ctx, r)
	}
	var b strings.Builder
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.prefix, a)
		return true
	})
	target, msg, attrs := C.CString("prosody"), C.CString(r.Message), C.CString(b.String())
	defer C.free(unsafe.Pointer(target))
	defer C.free(unsafe.Pointer(msg))
	defer C.free(unsafe.Pointer(attrs))
	C.prosodyInt_call_log(s.fn, s.ud, levelOf(r.Level), C.int64_t(r.Time.UnixMilli()), target, msg, attrs)
	return nil
}

func (h *hostHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		appendAttr(&b, h.prefix, a)
	}
	return &hostHandler{level: h.level, text: h.text.WithAttrs(as), attrs: b.String(), prefix: h.prefix}
}

func (h *hostHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &hostHandler{level: h.level, text: h.text.WithGroup(name), attrs: h.attrs, prefix: h.prefix + name + "."}
}

func levelOf(l slog.Level) C.int32_t {
	switch {
	case l >= slog.LevelError:
		return C.PROSODY_LOG_ERROR
	case l >= slog.LevelWarn:
		return C.PROSODY_LOG_WARN
	case l >= slog.LevelInfo:
		return C.PROSODY_LOG_INFO
	}
	return C.PROSODY_LOG_DEBUG
}

// appendAttr writes one attribute as logfmt, flattening groups.
func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			appendAttr(b, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(prefix)
	b.WriteString(a.Key)
	b.WriteByte('=')
	s := v.String()
	if s == "" || strings.ContainsAny(s, " =\"\t\n\\") {
		s = strconv.Quote(s)
	}
	b.WriteString(s)
}
