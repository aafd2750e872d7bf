#!/bin/sh
# The build tags of the nats.go driver for the library in directory $1 (see go-build.sh): one
# per API that differs between the releases the driver builds against, decided from the
# release's own source, never from its version number:
#   natsgo_legacy     no exported DecodeHeadersMsg (1.22.1 keeps it private; 1.28.0 exports it):
#                     decode_legacy.go links the private parser;
#   natsgo_subjects   the private publish-subject check validateSubject (added in 1.48.0) is
#                     there: subjects_linked.go links it and the hello declares validate_subject;
#   natsgo_tls_first  the TLSHandshakeFirst option is there: tlsfirst_linked.go uses it and the
#                     hello declares tls_first;
#   natsgo_websocket  the WebSocket transport (ws.go, its wss scheme) and the Compression option
#                     are there: websocket_linked.go uses it and the hello declares websocket and
#                     websocket_compression.
set -eu
tags=""
add() { tags="${tags:+$tags,}$1"; }
grep -q '^func DecodeHeadersMsg(' "$1/nats.go" || add natsgo_legacy
if grep -q '^func validateSubject(subj string) error {' "$1/nats.go"; then
    add natsgo_subjects
fi
if grep -q '^func TLSHandshakeFirst() Option {' "$1/nats.go"; then
    add natsgo_tls_first
fi
if [ -f "$1/ws.go" ] && grep -q 'wsSchemeTLS *= "wss"' "$1/ws.go" \
    && grep -q '^func Compression(enabled bool) Option {' "$1/nats.go"; then
    add natsgo_websocket
fi
echo "$tags"
