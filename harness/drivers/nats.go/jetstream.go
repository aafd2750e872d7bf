package main

// jetstream_create and jetstream_delete through nats.go's JetStreamContext
// (nc.JetStream(): AddStream, AddConsumer, CreateKeyValue, CreateObjectStore),
// the API 1.22.1 and later share. nats.go checks names before it sends
// (ErrInvalidStreamName, ErrInvalidBucketName, ...): those answer `refused`;
// the server's API errors (*nats.APIError) answer `protocol`.

import (
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

const jetStreamWait = 5 * time.Second // how long nats.go waits for a JetStream API answer

// localNameErrors are nats.go's own name checks, made before it sends anything.
var localNameErrors = []error{
	nats.ErrStreamNameRequired, nats.ErrInvalidStreamName, nats.ErrConsumerNameRequired,
	nats.ErrInvalidConsumerName, nats.ErrInvalidDurableName, nats.ErrInvalidBucketName,
	nats.ErrInvalidStoreName, nats.ErrNameRequired,
}

func (d *driver) jetStream() (nats.JetStreamContext, error) {
	nc, err := d.current()
	if err != nil {
		return nil, err
	}
	return nc.JetStream(nats.MaxWait(jetStreamWait))
}

// jetStreamError types what a JetStream call returned for the protocol.
func jetStreamError(err error) error {
	var apiErr *nats.APIError
	if errors.As(err, &apiErr) {
		return fail("protocol", "%d %d %s", apiErr.Code, apiErr.ErrorCode, apiErr.Description)
	}
	for _, local := range localNameErrors {
		if errors.Is(err, local) {
			return fail("refused", "%v", err)
		}
	}
	return err
}

func (d *driver) jetStreamCreate(req *request) (map[string]any, error) {
	js, err := d.jetStream()
	if err != nil {
		return nil, err
	}
	created, err := createIn(js, req)
	if err != nil {
		return nil, jetStreamError(err)
	}
	return map[string]any{"created": created}, nil
}

func createIn(js nats.JetStreamContext, req *request) (string, error) {
	switch req.Kind {
	case "stream":
		info, err := js.AddStream(&nats.StreamConfig{Name: req.Name, Subjects: req.Subjects})
		if err != nil {
			return "", err
		}
		return info.Config.Name, nil
	case "consumer", "durable":
		cfg := &nats.ConsumerConfig{Name: req.Name, AckPolicy: nats.AckExplicitPolicy}
		if req.Kind == "durable" {
			cfg = &nats.ConsumerConfig{Durable: req.Name, AckPolicy: nats.AckExplicitPolicy}
		}
		info, err := js.AddConsumer(stringOr(req.Stream), cfg)
		if err != nil {
			return "", err
		}
		return info.Name, nil
	case "kv":
		kv, err := js.CreateKeyValue(&nats.KeyValueConfig{Bucket: req.Name})
		if err != nil {
			return "", err
		}
		return kv.Bucket(), nil
	case "object_store":
		store, err := js.CreateObjectStore(&nats.ObjectStoreConfig{Bucket: req.Name})
		if err != nil {
			return "", err
		}
		status, err := store.Status()
		if err != nil {
			return "", err
		}
		return status.Bucket(), nil
	}
	return "", fail("invalid", "unknown kind %q", req.Kind)
}

func (d *driver) jetStreamDelete(req *request) (map[string]any, error) {
	js, err := d.jetStream()
	if err != nil {
		return nil, err
	}
	switch req.Kind {
	case "stream":
		err = js.DeleteStream(req.Name)
	case "consumer", "durable":
		err = js.DeleteConsumer(stringOr(req.Stream), req.Name)
	case "kv":
		err = js.DeleteKeyValue(req.Name)
	case "object_store":
		err = js.DeleteObjectStore(req.Name)
	default:
		err = fail("invalid", "unknown kind %q", req.Kind)
	}
	if err != nil {
		return nil, jetStreamError(err)
	}
	return map[string]any{}, nil
}

func stringOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
