"""vLLM KV events, produced by the release's own `BlockPool` and published by its own
`ZmqEventPublisher` (inproc sockets), for the scenario the project's `kv_events.json` files
record (the files' case descriptions, in order; each group of cases shares one publisher):

* plain (`int_*`, then `bytes_*` with `VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0`): a prompt's full
  blocks stored; decode fills the next block; the request's blocks freed (last first, as the
  scheduler frees them) and every free block allocated, evicting the cached ones; one step that
  stores a block and resets the prefix cache; replay from seq 1 on the ROUTER endpoint;
* extras: a LoRA + cache_salt + image request; the same request's reused blocks re-announced
  (`emit_cached_block_events`, kv_cache_report_mode "full"); look-ahead 1 (where the release
  has it); the default block size (where the file has the case);
* a batch encoded without the publisher; a publisher for data-parallel rank 1 with a topic.

Stored events are stamped by the release's own `KVCacheManager.take_events` (a full-attention
model's group metadata). The batch time is the files' fixed `ts` (the engine uses time.time()).
The kit compares the frames, the payload and the schema-less decode of every case.
"""

import os
import time
import types

import msgspec
import zmq

from .vllm_hashes import VllmHasher

TS = 1767225600.25


def _jsonify(x):
    if isinstance(x, (bytes, bytearray)):
        return {"$bytes": bytes(x).hex()}
    if isinstance(x, (list, tuple)):
        return [_jsonify(v) for v in x]
    if isinstance(x, dict):
        return {k: _jsonify(v) for k, v in x.items()}
    return x


class VllmEvents:
    def __init__(self, eng, hasher: VllmHasher):
        self.eng = eng
        self.h = hasher
        self.bp = eng.module("vllm.v1.core.block_pool")
        self.kv = eng.module("vllm.distributed.kv_events")
        self.kcm = eng.module("vllm.v1.core.kv_cache_manager")
        self.BlockPool = eng.fn("vllm.v1.core.block_pool", "BlockPool", ["num_gpu_blocks", "enable_caching", "hash_block_size"])
        eng.fn("vllm.v1.core.block_pool", "BlockPool.cache_full_blocks",
               ["request", "blocks", "num_cached_blocks", "num_full_blocks", "block_size", "kv_cache_group_id"])
        eng.fn("vllm.v1.core.block_pool", "BlockPool.get_new_blocks", ["num_blocks"])
        eng.fn("vllm.v1.core.block_pool", "BlockPool.free_blocks", ["ordered_blocks"])
        eng.fn("vllm.v1.core.block_pool", "BlockPool.reset_prefix_cache")
        eng.fn("vllm.v1.core.block_pool", "BlockPool.take_events")
        self.take_events = eng.fn("vllm.v1.core.kv_cache_manager", "KVCacheManager.take_events")
        self.Publisher = eng.fn("vllm.distributed.kv_events", "ZmqEventPublisher", ["data_parallel_rank", "endpoint", "replay_endpoint"])
        self.Batch = eng.fn("vllm.distributed.kv_events", "KVEventBatch")
        eng.fn("vllm.distributed.kv_events", "ZmqEventPublisher.publish", ["events"])
        self.has_report = hasattr(self.bp.BlockPool, "emit_cached_block_events")
        if self.has_report:
            eng.fn("vllm.v1.core.block_pool", "BlockPool.emit_cached_block_events")
        self.n = 0

    # -- the engine's pieces ---------------------------------------------------------------

    def pool(self, bs, blocks=16, lookahead=0):
        kw = {"enable_kv_cache_events": True}
        if lookahead:
            kw["num_hash_lookahead_tokens"] = lookahead
        return self.BlockPool(blocks, True, bs, **kw)

    def request(self, inputs, ids, bs, lookahead=0):
        r = self.h._request(ids, inputs)
        r.session_id = inputs.get("session_id")
        r.request_id = "kit-0"
        r.kv_cache_report_mode = "incremental"
        r._hasher = self.h.kcu.get_request_block_hasher(bs, self.h.hashing.get_hash_fn_by_name(inputs.get("hash_algo", "sha256_cbor")), *( [lookahead] if lookahead else []))
        r.block_hashes.extend(r._hasher(r))
        return r

    def grow(self, r, more):
        for t in more:
            r._all_token_ids.append(t)
            r.all_token_ids.append(t)
            r.num_tokens += 1
            r.block_hashes.extend(r._hasher(r))

    def events(self, pool):
        mgr = types.SimpleNamespace(block_pool=pool, kv_cache_event_metadata=[("full_attention", None)])
        return self.take_events(mgr)

    # -- publishing -------------------------------------------------------------------------

    def publisher(self, rank=0, topic=""):
        self.n += 1
        ep = f"inproc://kit-pub-{os.getpid()}-{self.n}"
        rep = f"inproc://kit-replay-{os.getpid()}-{self.n}"
        pub = self.Publisher(rank, ep, rep, topic=topic)
        sub = zmq.Context.instance().socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.setsockopt(zmq.RCVTIMEO, 5000)
        sub.connect(pub._endpoint)
        time.sleep(0.2)  # the SUB socket joins before anything is published
        return pub, sub

    def send(self, pub, sub, events):
        pub.publish(self.Batch(ts=TS, events=events, data_parallel_rank=pub._dp_rank))
        return sub.recv_multipart()

    def replay(self, pub, start_seq):
        d = zmq.Context.instance().socket(zmq.DEALER)
        d.setsockopt(zmq.RCVTIMEO, 5000)
        d.connect(pub._replay_endpoint)
        req = [b"", start_seq.to_bytes(8, "big")]
        d.send_multipart(req)
        out = []
        while True:
            f = d.recv_multipart()
            out.append(f)
            if f[2] == b"\xff" * 8:
                break
        d.close()
        return req, out

    # -- the scenario -------------------------------------------------------------------------

    def run(self, doc):
        """{case name: produced case} for the cases of one kv_events file."""
        cases = {c["name"]: c for c in doc["cases"]}
        out = {}

        def framed(name, frames):
            out[name] = {
                "frames_hex": [f.hex() for f in frames],
                "topic": frames[0].decode(),
                "seq": int.from_bytes(frames[1], "big"),
                "payload_hex": frames[2].hex(),
                "decoded_msgpack": _jsonify(msgspec.msgpack.decode(frames[2])),
            }

        for prefix, as_int in [("int_", "1"), ("bytes_", "0")]:
            first = cases.get(prefix + "stored_prefill_no_parent")
            if first is None:
                continue
            os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = as_int
            inp = first["inputs"]
            os.environ["PYTHONHASHSEED"] = inp["python_hash_seed"]
            self.h.kcu.init_none_hash(self.h.hashing.get_hash_fn_by_name(inp["hash_algo"]))
            bs = inp["block_size"]
            pool = self.pool(bs)
            pub, sub = self.publisher()
            ids = inp["prompt_token_ids"]
            r = self.request(inp, ids, bs)
            blocks = pool.get_new_blocks((len(ids) + bs - 1) // bs)
            full = len(ids) // bs
            pool.cache_full_blocks(r, blocks, 0, full, bs, 0)
            framed(prefix + "stored_prefill_no_parent", self.send(pub, sub, self.events(pool)))
            dec = cases.get(prefix + "stored_decode_with_parent")
            if dec:
                more = dec["inputs"]["appended_output_token_ids"]
                self.grow(r, more)
                need = (r.num_tokens + bs - 1) // bs - len(blocks)
                if need > 0:
                    blocks += pool.get_new_blocks(need)
                pool.cache_full_blocks(r, blocks, full, r.num_tokens // bs, bs, 0)
                framed(prefix + "stored_decode_with_parent", self.send(pub, sub, self.events(pool)))
            if prefix + "removed_on_eviction" in cases:
                pool.free_blocks(list(reversed(blocks)))
                taken = pool.get_new_blocks(pool.get_num_free_blocks())
                framed(prefix + "removed_on_eviction", self.send(pub, sub, self.events(pool)))
                pool.free_blocks(taken)
            cl = cases.get(prefix + "stored_then_all_cleared_one_batch")
            if cl:
                ids2 = cl["inputs"]["prompt_token_ids"]
                r2 = self.request(inp, ids2, bs)
                b2 = pool.get_new_blocks((len(ids2) + bs - 1) // bs)
                pool.cache_full_blocks(r2, b2, 0, len(ids2) // bs, bs, 0)
                pool.free_blocks(list(reversed(b2)))
                pool.reset_prefix_cache()
                framed(prefix + "stored_then_all_cleared_one_batch", self.send(pub, sub, self.events(pool)))
            rep = cases.get(prefix + "replay_from_seq1")
            if rep:
                req, replies = self.replay(pub, rep["inputs"]["start_seq"])
                out[prefix + "replay_from_seq1"] = {
                    "request_frames_hex": [f.hex() for f in req],
                    "reply_frames_hex": [[f.hex() for f in fr] for fr in replies],
                }
            pub.shutdown()
            sub.close()

        os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "1"
        pub = sub = None
        for name in ["int_stored_lora_salt_mm", "int_stored_reused_blocks_report_mode_full",
                     "int_stored_lookahead1", "int_stored_default_bs64"]:
            c = cases.get(name)
            if c is None:
                continue
            if pub is None:
                pub, sub = self.publisher()
            inp = c["inputs"]
            if name == "int_stored_reused_blocks_report_mode_full":
                if not self.has_report:
                    continue
                base = cases["int_stored_lora_salt_mm"]["inputs"]
                inp = {**base, "session_id": None, **inp}
                bs = base["block_size"]
                r = self.request(inp, inp["prompt_token_ids"], bs)
                lora_pool.emit_cached_block_events(r, inp["num_cached_blocks"], bs, 0)
                framed(name, self.send(pub, sub, self.events(lora_pool)))
                continue
            os.environ["PYTHONHASHSEED"] = inp["python_hash_seed"]
            self.h.kcu.init_none_hash(self.h.hashing.get_hash_fn_by_name(inp["hash_algo"]))
            bs = inp["block_size"]
            la = inp.get("num_hash_lookahead_tokens") or 0
            if la and not self.h.lookahead:
                continue
            pool = self.pool(bs, blocks=16, lookahead=la)
            ids = inp["prompt_token_ids"]
            r = self.request(inp, ids, bs, la)
            blocks = pool.get_new_blocks((len(ids) + bs - 1) // bs)
            pool.cache_full_blocks(r, blocks, 0, len(r.block_hashes), bs, 0)
            if name == "int_stored_default_bs64":
                pool.free_blocks(list(reversed(blocks)))
                pool.get_new_blocks(pool.get_num_free_blocks())
            if name == "int_stored_lora_salt_mm":
                lora_pool = pool
            framed(name, self.send(pub, sub, self.events(pool)))
        if pub is not None:
            pub.shutdown()
            sub.close()

        c = cases.get("int_batch_without_dp_rank")
        if c is not None:
            ev = self.kv.BlockRemoved(block_hashes=[c["decoded_msgpack"][1][0]["block_hashes"][0]], medium="GPU", group_idx=0)
            payload = msgspec.msgpack.Encoder().encode(self.Batch(ts=TS, events=[ev]))
            out["int_batch_without_dp_rank"] = {"frames_hex": None, "payload_hex": payload.hex(),
                                                "decoded_msgpack": _jsonify(msgspec.msgpack.decode(payload))}
        c = cases.get("int_dp_rank1_topic")
        if c is not None:
            inp = {**cases["int_stored_prefill_no_parent"]["inputs"], **c["inputs"]}
            os.environ["PYTHONHASHSEED"] = inp["python_hash_seed"]
            self.h.kcu.init_none_hash(self.h.hashing.get_hash_fn_by_name(inp["hash_algo"]))
            bs = inp["block_size"]
            pool = self.pool(bs)
            pub, sub = self.publisher(rank=inp["data_parallel_rank"], topic=inp["topic"])
            r = self.request(inp, inp["prompt_token_ids"], bs)
            blocks = pool.get_new_blocks(len(inp["prompt_token_ids"]) // bs)
            pool.cache_full_blocks(r, blocks, 0, len(blocks), bs, 0)
            framed("int_dp_rank1_topic", self.send(pub, sub, self.events(pool)))
            if "all_blocks_cleared_only" in cases:
                framed("all_blocks_cleared_only", self.send(pub, sub, [self.kv.AllBlocksCleared()]))
            pub.shutdown()
            sub.close()
        return out


COMPARED = ["frames_hex", "topic", "seq", "payload_hex", "decoded_msgpack", "request_frames_hex", "reply_frames_hex"]


def compare(doc, produced):
    ok, bad = 0, []
    for c in doc["cases"]:
        got = produced.get(c["name"])
        if got is None:
            bad.append((c["name"], ["(not produced)"]))
            continue
        diffs = [k for k in COMPARED if k in c and c.get(k) != got.get(k)]
        if diffs:
            bad.append((c["name"], diffs))
        else:
            ok += 1
    return ok, len(doc["cases"]), bad
