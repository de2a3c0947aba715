// Package middleware holds the layers between the key queue and the user's
// handler. An Invoker runs one event; a Middleware wraps an Invoker in
// another. Chain lists layers outermost first, in the order a request
// passes through them, so the code reads like the data path:
//
//	Chain(HandlerInvoker(h), Retry(...), Cancellation(), Concurrency(...), Timeout(...))
//
// Every layer runs on the goroutine of the event it handles; none starts
// goroutines of its own.
package middleware

import "github.com/prosody-events/prosody-go/core/event"

// Invoker runs one event and returns its outcome.
type Invoker func(ctx *event.Context, ev event.Event) error

// Middleware wraps an Invoker.
type Middleware func(next Invoker) Invoker

// Chain wraps inner in layers, the first layer outermost.
func Chain(inner Invoker, layers ...Middleware) Invoker {
	for i := len(layers) - 1; i >= 0; i-- {
		inner = layers[i](inner)
	}
	return inner
}

// HandlerInvoker dispatches events to h by kind.
func HandlerInvoker(h event.Handler) Invoker {
	return func(ctx *event.Context, ev event.Event) error {
		switch e := ev.(type) {
		case *event.Message:
			return h.OnMessage(ctx, e)
		case *event.Timer:
			return h.OnTimer(ctx, e)
		default:
			return nil
		}
	}
}
