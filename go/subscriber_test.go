package kvexact

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSubscriberMarksAnUnreachableEngineLost: kvexact's own subscriber, pointed at a port
// nothing listens on (127.0.0.1 only), marks the endpoint's rank lost at once: its
// predictions are unknown (UnknownStreamLost), never a count. The full path against a live
// publisher is ffi/tests/subscriber.rs (against the loopback emulator).
func TestSubscriberMarksAnUnreachableEngineLost(t *testing.T) {
	x, err := NewIndex("vllm-kv-map-v3-r0.31", "", 16, IndexOptions{MaxSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	id, err := x.AddEndpoint(EndpointConfig{Name: "e", DPRanks: 1, GPUBlocks: 10, StartsEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSubscriber(x, SubscriberOptions{Endpoint: id, Publishers: []string{"127.0.0.1:1", "127.0.0.1:2"}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("two publishers for one rank: %v", err)
	}
	s, err := NewSubscriber(x, SubscriberOptions{Endpoint: id, Publishers: []string{"127.0.0.1:1"}, Replays: []string{""}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := x.Predict([]uint64{1}, 17, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p[0].UnknownReason == UnknownStreamLost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not marked lost: %+v", p[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := s.Counters()
	if err != nil || !c.Running || c.Disconnects == 0 || c.Lost == 0 {
		t.Fatalf("%+v %v", c, err)
	}
	text, err := s.Prometheus()
	if err != nil || !strings.Contains(string(text), `kvexact_subscriber_lost_total{subscriber="e"}`) {
		t.Fatalf("%s %v", text, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Counters(); c.Running {
		t.Fatal("still running")
	}
}
