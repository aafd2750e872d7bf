package main

import (
	_ "unsafe" // for go:linkname

	"github.com/nats-io/nats.go"
)

// nats.go has no public header encoder: PublishMsg and RequestMsg serialise
// Msg.Header with the private (*Msg).headerBytes, in every version. The
// driver calls that same function, so encode_headers needs no server.
//
//go:linkname msgHeaderBytes github.com/nats-io/nats%2ego.(*Msg).headerBytes
func msgHeaderBytes(m *nats.Msg) ([]byte, error)

func encodeHeaderBlock(h nats.Header) ([]byte, error) {
	return msgHeaderBytes(&nats.Msg{Header: h})
}
