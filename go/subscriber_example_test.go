package kvexact

import "fmt"

// ExampleNewSubscriber routes with kvexact's own subscriptions: the gateway names each
// engine rank's ZMQ PUB address (and replay endpoint) and writes no ZMQ, replay or
// reconnect code. Here the publisher is a port nothing listens on and the endpoint joined
// midway, so its prediction is unknown — route it as a miss, never as a hit. Against a live
// engine (ffi/tests/subscriber.rs and ffi/tests/c/subscriber.c run it against the loopback
// emulator) the same calls give the engine's own cached-token counts.
func ExampleNewSubscriber() {
	ix, err := NewIndex("vllm-kv-map-v3-r0.31", "", 16, IndexOptions{})
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	id, err := ix.AddEndpoint(EndpointConfig{Name: "vllm-0", DPRanks: 1, GPUBlocks: 4095})
	if err != nil {
		panic(err)
	}
	sub, err := NewSubscriber(ix, SubscriberOptions{
		Endpoint:   id,
		Publishers: []string{"127.0.0.1:1"}, // the engine's --kv-events-config endpoint
	})
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	if err := sub.Start(); err != nil {
		panic(err)
	}
	// Per request: its keys (RoutePredict computes them from the request body), then the
	// endpoint rank with the most cached tokens among the known ones.
	preds, err := ix.Predict([]uint64{0x5157}, 17, 0)
	if err != nil {
		panic(err)
	}
	best, tokens := -1, uint64(0)
	for i, p := range preds {
		if p.Status == PredictionCached && (best < 0 || p.Tokens > tokens) {
			best, tokens = i, p.Tokens
		}
	}
	fmt.Println("known endpoints:", best+1, "unknown reason:", preds[0].UnknownReason == UnknownUnsynced || preds[0].UnknownReason == UnknownStreamLost)
	// Output: known endpoints: 0 unknown reason: true
}
