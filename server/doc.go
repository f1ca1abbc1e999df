// Package server serves the Durable gRPC service over an engine.
//
// Every handler does the same four things and nothing else: it validates the
// request (so the engine only ever sees well-formed input, and a bad request is
// codes.InvalidArgument naming the offending field as it is spelled in
// durable.proto), hands it to the engine, and maps the engine's error to a
// status code with errors.Is and errors.As, so wrapped engine errors keep their
// code. All rules live in the engine; none live here.
package server
