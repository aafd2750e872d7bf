module github.com/nats-conformance/driver-stango

go 1.26.0

require github.com/nats-io/stan.go v0.10.4

require (
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/nats-io/nats-server/v2 v2.15.2 // indirect
	github.com/nats-io/nats-streaming-server v0.25.6 // indirect
	github.com/nats-io/nats.go v1.53.1 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
