#!/bin/sh
# The build tags of the nats.go driver for the library in directory $1 (see go-build.sh): one
# per API that differs between the releases the driver builds against, decided from the
# release's own source, never from its version number:
#   natsgo_legacy    no exported DecodeHeadersMsg (1.22.1 keeps it private; 1.28.0 exports it):
#                    decode_legacy.go links the private parser;
#   natsgo_subjects  the private publish-subject check validateSubject (added in 1.48.0) is
#                    there: subjects_linked.go links it and the hello declares validate_subject.
set -eu
tags=""
grep -q '^func DecodeHeadersMsg(' "$1/nats.go" || tags="natsgo_legacy"
if grep -q '^func validateSubject(subj string) error {' "$1/nats.go"; then
    tags="${tags:+$tags,}natsgo_subjects"
fi
echo "$tags"
