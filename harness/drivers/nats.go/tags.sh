#!/bin/sh
# The build tags of the nats.go driver for the library in directory $1 (see go-build.sh): the one
# API difference is that only newer releases export DecodeHeadersMsg.
if grep -q '^func DecodeHeadersMsg' "$1/nats.go"; then echo ""; else echo natsgo_legacy; fi
