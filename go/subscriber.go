package kvexact

/*
#include <stdlib.h>
#include "kvexact.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// SubscriberOptions say which sockets kvexact's own subscriber follows for one endpoint of
// an index (kvexact_subscriber_options).
type SubscriberOptions struct {
	// Endpoint is the endpoint's id in the index.
	Endpoint uint32
	// Publishers: per data-parallel rank, rank 0 first, the engine's ZMQ PUB "host:port"
	// (a TensorRT-LLM index: the one republished drain).
	Publishers []string
	// Replays: nil, or per rank "" (none) or the engine's replay endpoint "host:port".
	Replays []string
	// Topic is the topic prefix subscribed to ("": every message).
	Topic string
	// Queue is the messages held between the sockets and the index (0: 8192); a message
	// that does not fit is dropped and its rank marked lost.
	Queue uint32
	// ReplayTimeoutMs bounds one replay request (0: 5000).
	ReplayTimeoutMs uint32
}

// SubscriberCounters are a subscriber's counters (kvexact_subscriber_counters).
type SubscriberCounters struct {
	Running                               bool
	Received, Delivered, Refused, Dropped uint64
	Disconnects, Lost                     uint64
	Replays, Replayed, ReplayFailures     uint64
}

// Subscriber feeds one endpoint of an index from its engine's KV-event sockets, with no ZMQ
// code in the caller: reconnects, a replay after each gap, a bounded queue whose overflow
// marks the rank lost (predictions unknown, never stale).
type Subscriber struct {
	p  *C.kvexact_subscriber
	ix *Index
}

// NewSubscriber makes a subscriber for an endpoint of x (not started: see Start).
func NewSubscriber(x *Index, o SubscriberOptions) (*Subscriber, error) {
	n := len(o.Publishers)
	var c C.kvexact_subscriber_options
	c.struct_size = C.uint32_t(unsafe.Sizeof(c))
	c.endpoint = C.uint32_t(o.Endpoint)
	c.n_ranks = C.size_t(n)
	c.queue = C.uint32_t(o.Queue)
	c.replay_timeout_ms = C.uint32_t(o.ReplayTimeoutMs)
	// C memory: the struct passed to C may not hold Go pointers.
	ptrs := func(list []string, optional bool) **C.char {
		if n == 0 {
			return nil
		}
		arr := (*[1 << 20]*C.char)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))[:n:n]
		for i := range arr {
			arr[i] = nil
			if i < len(list) && !(optional && list[i] == "") {
				arr[i] = C.CString(list[i])
			}
		}
		return &arr[0]
	}
	free := func(p **C.char) {
		if p == nil {
			return
		}
		arr := (*[1 << 20]*C.char)(unsafe.Pointer(p))[:n:n]
		for _, s := range arr {
			if s != nil {
				C.free(unsafe.Pointer(s))
			}
		}
		C.free(unsafe.Pointer(p))
	}
	c.publishers = ptrs(o.Publishers, false)
	defer free(c.publishers)
	if o.Replays != nil {
		c.replays = ptrs(o.Replays, true)
		defer free(c.replays)
	}
	if o.Topic != "" {
		c.topic = C.CString(o.Topic)
		defer C.free(unsafe.Pointer(c.topic))
	}
	var p *C.kvexact_subscriber
	var cerr *C.kvexact_error
	st := C.kvexact_subscriber_new(x.p, &c, &p, &cerr)
	runtime.KeepAlive(x)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	s := &Subscriber{p: p, ix: x}
	runtime.SetFinalizer(s, (*Subscriber).Close)
	return s, nil
}

// Start starts subscribing (a publisher not reachable yet is tried again until it answers,
// its rank marked lost meanwhile). Starting a started subscriber does nothing.
func (s *Subscriber) Start() error {
	var cerr *C.kvexact_error
	st := C.kvexact_subscriber_start(s.p, &cerr)
	runtime.KeepAlive(s)
	if st != C.KVEXACT_OK {
		return takeError(st, cerr)
	}
	return nil
}

// Stop closes the sockets and joins the subscriber's thread; the endpoint's ranks are
// marked lost. It may be started again.
func (s *Subscriber) Stop() error {
	st := C.kvexact_subscriber_stop(s.p)
	runtime.KeepAlive(s)
	if st != C.KVEXACT_OK {
		return Status(st)
	}
	return nil
}

// Close stops and frees the subscriber.
func (s *Subscriber) Close() {
	if s.p != nil {
		C.kvexact_subscriber_free(s.p)
		s.p = nil
		runtime.SetFinalizer(s, nil)
	}
}

// Counters are the subscriber's counters since its last start.
func (s *Subscriber) Counters() (SubscriberCounters, error) {
	var c C.kvexact_subscriber_counters
	c.struct_size = C.uint32_t(unsafe.Sizeof(c))
	st := C.kvexact_subscriber_get_counters(s.p, &c)
	runtime.KeepAlive(s)
	if st != C.KVEXACT_OK {
		return SubscriberCounters{}, Status(st)
	}
	return SubscriberCounters{
		Running: c.running != 0, Received: uint64(c.received), Delivered: uint64(c.delivered),
		Refused: uint64(c.refused), Dropped: uint64(c.dropped), Disconnects: uint64(c.disconnects),
		Lost: uint64(c.lost), Replays: uint64(c.replays), Replayed: uint64(c.replayed),
		ReplayFailures: uint64(c.replay_failures),
	}, nil
}

// Prometheus is the Prometheus text of the subscriber's counters.
func (s *Subscriber) Prometheus() ([]byte, error) {
	b, err := sized(func(buf []byte, n *C.size_t) C.kvexact_status {
		return C.kvexact_subscriber_prometheus(s.p, bytesPtr(buf), C.size_t(len(buf)), n)
	})
	runtime.KeepAlive(s)
	return b, err
}
