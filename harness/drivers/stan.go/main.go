// stan.go driver: nats-conformance-stan-driver/1 on stdin/stdout (see ../README.md,
// "NATS Streaming drivers", and schemas/stan-driver-protocol.schema.json). Logs go to stderr.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	stan "github.com/nats-io/stan.go"
	"github.com/nats-io/stan.go/pb"
)

const protocol = "nats-conformance-stan-driver/1"

var capabilities = []string{"queue_group", "durable_name", "manual_ack", "ack_wait",
	"max_in_flight", "start_sequence", "start_time_delta", "start_last_received",
	"start_first", "start_new_only"}

type start struct {
	Position    string `json:"position"`
	Sequence    uint64 `json:"sequence"`
	TimeDeltaMs int64  `json:"time_delta_ms"`
}

type request struct {
	ID          *int64  `json:"id"`
	Cmd         string  `json:"cmd"`
	URL         string  `json:"url"`
	ClusterID   string  `json:"cluster_id"`
	ClientID    string  `json:"client_id"`
	TimeoutMs   int64   `json:"timeout_ms"`
	Subject     string  `json:"subject"`
	DataB64     string  `json:"data_b64"`
	Queue       *string `json:"queue"`
	DurableName *string `json:"durable_name"`
	Start       start   `json:"start"`
	ManualAck   bool    `json:"manual_ack"`
	AckWaitS    *int    `json:"ack_wait_s"`
	MaxInFlight *int    `json:"max_in_flight"`
	Sub         string  `json:"sub"`
	Sequence    uint64  `json:"sequence"`
}

// failure is an error with its protocol error type.
type failure struct{ kind, message string }

func (f failure) Error() string { return f.message }

type subscription struct {
	sub     stan.Subscription
	mu      sync.Mutex
	pending map[uint64]*stan.Msg
}

// protocol is the real stdout: stan.go prints what it drops (a malformed MsgProto or PubAck)
// with fmt.Printf, so main points os.Stdout at stderr to keep those lines off the protocol.
var protocolOut = os.Stdout

type driver struct {
	out     sync.Mutex
	conn    stan.Conn
	subs    map[string]*subscription
	nextSub int
}

func (d *driver) write(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot encode:", err)
		return
	}
	d.out.Lock()
	defer d.out.Unlock()
	protocolOut.Write(append(line, '\n'))
}

func (d *driver) connected() (stan.Conn, error) {
	if d.conn == nil {
		return nil, failure{"connection", "not connected"}
	}
	return d.conn, nil
}

func (d *driver) handle(name string) (*subscription, error) {
	s, ok := d.subs[name]
	if !ok {
		return nil, failure{"invalid", "no subscription " + name}
	}
	return s, nil
}

func subOptions(r *request) ([]stan.SubscriptionOption, error) {
	opts := []stan.SubscriptionOption{}
	if r.ManualAck {
		opts = append(opts, stan.SetManualAckMode())
	}
	if r.AckWaitS != nil {
		opts = append(opts, stan.AckWait(time.Duration(*r.AckWaitS)*time.Second))
	}
	if r.MaxInFlight != nil {
		opts = append(opts, stan.MaxInflight(*r.MaxInFlight))
	}
	if r.DurableName != nil {
		opts = append(opts, stan.DurableName(*r.DurableName))
	}
	switch r.Start.Position {
	case "NewOnly":
		opts = append(opts, stan.StartAt(pb.StartPosition_NewOnly))
	case "LastReceived":
		opts = append(opts, stan.StartWithLastReceived())
	case "First":
		opts = append(opts, stan.DeliverAllAvailable())
	case "SequenceStart":
		opts = append(opts, stan.StartAtSequence(r.Start.Sequence))
	case "TimeDeltaStart":
		opts = append(opts, stan.StartAtTimeDelta(time.Duration(r.Start.TimeDeltaMs)*time.Millisecond))
	default:
		return nil, failure{"invalid", "unknown start position " + r.Start.Position}
	}
	return opts, nil
}

func (d *driver) run(r *request) (map[string]any, error) {
	switch r.Cmd {
	case "hello":
		return map[string]any{"protocol": protocol, "library": "stan.go", "version": stan.Version,
			"language": "Go " + runtime.Version(), "capabilities": capabilities}, nil
	case "connect":
		conn, err := stan.Connect(r.ClusterID, r.ClientID, stan.NatsURL(r.URL),
			stan.ConnectWait(time.Duration(r.TimeoutMs)*time.Millisecond),
			stan.SetConnectionLostHandler(func(_ stan.Conn, err error) {
				d.write(map[string]any{"event": "error", "type": "connection", "message": err.Error()})
			}))
		if err != nil {
			return nil, failure{"connection", err.Error()}
		}
		d.conn = conn
		return map[string]any{}, nil
	case "publish":
		conn, err := d.connected()
		if err != nil {
			return nil, err
		}
		data, err := base64.StdEncoding.DecodeString(r.DataB64)
		if err != nil {
			return nil, failure{"invalid", err.Error()}
		}
		acked := make(chan error, 1)
		guid, err := conn.PublishAsync(r.Subject, data, func(_ string, err error) { acked <- err })
		if err != nil {
			return nil, failure{"refused", err.Error()}
		}
		select {
		case err := <-acked:
			if err != nil {
				return nil, failure{"protocol", err.Error()}
			}
		case <-time.After(time.Duration(r.TimeoutMs) * time.Millisecond):
			return nil, failure{"timeout", "no PubAck"}
		}
		return map[string]any{"guid": guid}, nil
	case "subscribe":
		conn, err := d.connected()
		if err != nil {
			return nil, err
		}
		opts, err := subOptions(r)
		if err != nil {
			return nil, err
		}
		d.nextSub++
		name := strconv.Itoa(d.nextSub)
		s := &subscription{pending: map[uint64]*stan.Msg{}}
		handler := func(m *stan.Msg) {
			s.mu.Lock()
			s.pending[m.Sequence] = m
			s.mu.Unlock()
			d.write(map[string]any{"event": "message", "sub": name, "sequence": m.Sequence,
				"subject": m.Subject, "data_b64": base64.StdEncoding.EncodeToString(m.Data),
				"redelivered": m.Redelivered, "timestamp": m.Timestamp})
		}
		if r.Queue != nil {
			s.sub, err = conn.QueueSubscribe(r.Subject, *r.Queue, handler, opts...)
		} else {
			s.sub, err = conn.Subscribe(r.Subject, handler, opts...)
		}
		if err != nil {
			return nil, failure{"protocol", err.Error()}
		}
		d.subs[name] = s
		return map[string]any{"sub": name}, nil
	case "ack":
		s, err := d.handle(r.Sub)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		m := s.pending[r.Sequence]
		s.mu.Unlock()
		if m == nil {
			return nil, failure{"invalid", fmt.Sprintf("no message %d on subscription %s", r.Sequence, r.Sub)}
		}
		if err := m.Ack(); err != nil {
			return nil, failure{"protocol", err.Error()}
		}
		return map[string]any{}, nil
	case "unsubscribe":
		s, err := d.handle(r.Sub)
		if err != nil {
			return nil, err
		}
		if err := s.sub.Unsubscribe(); err != nil {
			return nil, failure{"protocol", err.Error()}
		}
		delete(d.subs, r.Sub)
		return map[string]any{}, nil
	case "close":
		conn, err := d.connected()
		if err != nil {
			return nil, err
		}
		d.conn = nil
		if err := conn.Close(); err != nil {
			return nil, failure{"protocol", err.Error()}
		}
		return map[string]any{}, nil
	case "exit":
		return map[string]any{}, nil
	}
	return nil, failure{"unsupported", "unknown command " + r.Cmd}
}

func main() {
	os.Stdout = os.Stderr
	d := &driver{subs: map[string]*subscription{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var r request
		if err := json.Unmarshal(in.Bytes(), &r); err != nil || r.ID == nil {
			d.write(map[string]any{"id": nil, "ok": false,
				"error": map[string]any{"type": "invalid", "message": fmt.Sprint("not a request: ", err)}})
			continue
		}
		result, err := d.run(&r)
		if err != nil {
			var f failure
			if !errors.As(err, &f) {
				f = failure{"other", err.Error()}
			}
			d.write(map[string]any{"id": *r.ID, "ok": false,
				"error": map[string]any{"type": f.kind, "message": f.message}})
		} else {
			d.write(map[string]any{"id": *r.ID, "ok": true, "result": result})
		}
		if r.Cmd == "exit" {
			return
		}
	}
}
