//go:build !natsgo_subjects

package main

// Releases before 1.48.0 check no publish subject (the server's -ERR is the
// only check): validate_subject is unsupported and not declared.
var publishSubjectCheck func(string) error
