//go:build !natsgo_websocket

package main

import "github.com/nats-io/nats.go"

// Releases without the WebSocket transport: websocket and
// websocket_compression are unsupported and not declared.
var compressionOption func(bool) nats.Option
