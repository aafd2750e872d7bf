//go:build !natsgo_tls_first

package main

import "github.com/nats-io/nats.go"

// Releases without TLSHandshakeFirst: tls_first is unsupported and not
// declared.
var tlsFirstOption func() nats.Option
