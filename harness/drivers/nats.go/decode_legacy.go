//go:build natsgo_legacy

package main

import (
	_ "unsafe" // for go:linkname

	"github.com/nats-io/nats.go"
)

// Older nats.go (Debian's 1.22.1) keeps its header parser private; the
// driver links to it by name. build.sh sets the tag natsgo_legacy when the
// library has no exported DecodeHeadersMsg.
//
//go:linkname decodeHeadersMsg github.com/nats-io/nats%2ego.decodeHeadersMsg
func decodeHeadersMsg(data []byte) (nats.Header, error)

func decodeHeaderBlock(block []byte) (nats.Header, error) {
	return decodeHeadersMsg(block)
}
