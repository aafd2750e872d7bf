//go:build natsgo_subjects

package main

import _ "unsafe" // for go:linkname

// nats.go 1.48.0 added publish subject validation: Publish, PublishMsg and
// Request check the subject and reply with the private validateSubject
// (no whitespace, not empty) unless SkipSubjectValidation is set. tags.sh
// sets natsgo_subjects when the release has it; the driver links to it by
// name, as decode_legacy.go does for the header parser.
//
//go:linkname validateSubject github.com/nats-io/nats%2ego.validateSubject
func validateSubject(subj string) error

var publishSubjectCheck = validateSubject
