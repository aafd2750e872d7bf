//go:build !natsgo_legacy

package main

import "github.com/nats-io/nats.go"

// Newer nats.go exports its header parser.
func decodeHeaderBlock(block []byte) (nats.Header, error) {
	return nats.DecodeHeadersMsg(block)
}
