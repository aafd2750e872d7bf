//go:build natsgo_websocket

package main

import "github.com/nats-io/nats.go"

// nats.go dials ws:// and wss:// URLs (ws.go) and offers permessage-deflate
// with its Compression option; tags.sh sets natsgo_websocket where the release
// has both.
var compressionOption func(bool) nats.Option = nats.Compression
