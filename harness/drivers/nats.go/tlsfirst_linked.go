//go:build natsgo_tls_first

package main

import "github.com/nats-io/nats.go"

// nats.go 1.31.0 added TLSHandshakeFirst (the TLS handshake before the
// server's INFO); tags.sh sets natsgo_tls_first where the release has it.
var tlsFirstOption func() nats.Option = nats.TLSHandshakeFirst
