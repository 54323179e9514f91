"""SGLang KV events by the release's own code, for the scenario `sglang/kv_events.json` records
(each case's `operations`, in order; one scheduler step per operation, except the case that
says its inserts happen in one step):

* the cache is the release's `RadixCache` with events on (`CacheInitParams`,
  `enable_kv_cache_events=True`); its `KVCacheEventRecorder` queues and coalesces the events
  (`insert` -> `BlockStored`, `evict` -> `BlockRemoved`, `reset` -> `AllBlocksCleared`, the
  HiCache host tier's `record_store`/`record_remove` with `StorageMedium.CPU`);
* after each step the scheduler's own `SchedulerKvEventsPublisher.publish_kv_events` takes the
  cache's events into a `KVEventBatch` and hands it to the `ZmqEventPublisher` that
  `EventPublisherFactory.create` built from the case's `--kv-events-config` (endpoint replaced
  by an inproc one, offset by the rank as the engine offsets it); the kit's SUB socket
  receives the frames; the `replay_from_seq_1` case asks the publisher's ROUTER for seq >= 1;
* the batch time is the files' fixed clock (1767225600.25 + step; 1767225700.25 for the
  synthetic case, 1767225800.25 + i for the replay case): the kit replaces the `time` that
  `kv_events_publisher.py` reads with that clock (the engine calls time.time()).

What the kit supplies that is not the engine's: the KV indices an insert stores (the ids'
positions; values never reach an event) and an allocator whose `free_segment` does nothing
(the pool the radix cache frees into on eviction). Two things the inputs do not record and the
kit takes from the cases' descriptions: `coalescing_one_step` runs its three inserts in one
step, and `insert_then_record_store_cpu` publishes only the host-tier store (the insert's own
GPU store is taken and dropped first, as the file's batch shows). The synthetic case's events
(`encoding_edges`) are built with the release's classes from the boundary values its
description names.

Each batch is compared field for field: frames, topic, seq, payload bytes and length, the
decode of the published objects (class, tag, hashes as int / decimal / u64 hex, parent, token
ids, block size, LoRA id, medium, metadata, wire field order), the release's typed decode
(`KVEventBatch`: ok, same bytes back, fields lost, or its error), the schema-less decode; the
header's endpoint-offset and publisher-rank examples by `ZmqEventPublisher.offset_endpoint_port`
and `select_kv_publisher_dp_rank`.
"""

import atexit
import json
import os
import time
import types
from array import array

import msgspec
import zmq

from .engine import EngineChanged

T0 = 1767225600.25
T_EDGES = 1767225700.25
T_REPLAY = 1767225800.25
NOT_PUBLISHED = "no events queued: nothing is published"


class Idx:
    """The KV indices an insert stores (the kit's stand-in for a 1-D int64 tensor: slicing,
    len, clone, the concatenation torch.cat does)."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = list(v)

    def __len__(self):
        return len(self.v)

    def __getitem__(self, s):
        return Idx(self.v[s]) if isinstance(s, slice) else self.v[s]

    def __iter__(self):
        return iter(self.v)

    def clone(self):
        return Idx(self.v)

    def to(self, *a, **k):
        return Idx(self.v)

    def tolist(self):
        return list(self.v)


class Allocator:
    """The token pool the radix cache frees into (eviction); frees are counted, nothing else."""

    device = "cpu"

    def __init__(self, size=1 << 30):
        self.size = size
        self.freed = 0

    def free_segment(self, indices, start_pos=0):
        self.freed += len(indices)

    def free_segments(self, segs):
        for s, _ in segs:
            self.free_segment(s)

    def available_size(self):
        return self.size


def torch_standins(eng):
    """torch.cat / torch.empty / torch.tensor on 1-D index lists (RadixCache.reset and
    match_prefix build their results with them); recorded in the kit header."""
    torch = __import__("torch")
    torch.cat = lambda xs, *a, **k: Idx([v for x in xs for v in x])
    torch.empty = lambda shape, *a, **k: Idx([0] * (shape[0] if isinstance(shape, tuple) else shape))
    torch.tensor = lambda v, *a, **k: Idx(v)
    eng.standins = sorted(set(getattr(eng, "standins", [])) | {"torch.cat", "torch.empty", "torch.tensor"})


def u64hex(x):
    return None if x is None else "%016x" % (x & (2**64 - 1))


def jsonable(v):
    if isinstance(v, tuple):
        return [jsonable(x) for x in v]
    if isinstance(v, list):
        return [jsonable(x) for x in v]
    return v


class SglangEvents:
    def __init__(self, eng):
        self.eng = eng
        torch_standins(eng)
        self.kv = eng.module("sglang.srt.disaggregation.kv_events")
        self.bp = eng.module("sglang.srt.mem_cache.base_prefix_cache")
        self.cip = eng.module("sglang.srt.mem_cache.cache_init_params")
        self.RadixCache = eng.fn("sglang.srt.mem_cache.radix_cache", "RadixCache", ["params"])
        self.RadixKey = eng.fn("sglang.srt.mem_cache.radix_cache", "RadixKey", ["token_ids", "extra_key"])
        for q, p in [("RadixCache.insert", ["params"]), ("RadixCache.evict", ["params"]), ("RadixCache.reset", []),
                     ("RadixCache.take_events", [])]:
            eng.fn("sglang.srt.mem_cache.radix_cache", q, p)
        for q, p in [("KVCacheEventRecorder.record_store", ["node", "medium"]),
                     ("KVCacheEventRecorder.record_remove", ["node", "medium"]),
                     ("KVCacheEventRecorder.enqueue", ["event"]), ("KVCacheEventRecorder.take", [])]:
            eng.fn("sglang.srt.mem_cache.events", q, p)
        self.Medium = eng.fn("sglang.srt.disaggregation.kv_events", "StorageMedium")
        self.Batch = eng.fn("sglang.srt.disaggregation.kv_events", "KVEventBatch")
        self.BlockStored = eng.fn("sglang.srt.disaggregation.kv_events", "BlockStored")
        self.BlockRemoved = eng.fn("sglang.srt.disaggregation.kv_events", "BlockRemoved")
        self.AllCleared = eng.fn("sglang.srt.disaggregation.kv_events", "AllBlocksCleared")
        self.Factory = eng.fn("sglang.srt.disaggregation.kv_events", "EventPublisherFactory.create", ["config", "attn_dp_rank"])
        eng.fn("sglang.srt.disaggregation.kv_events", "ZmqEventPublisher", ["attn_dp_rank", "endpoint", "replay_endpoint"])
        eng.fn("sglang.srt.disaggregation.kv_events", "ZmqEventPublisher.publish", ["events"])
        eng.fn("sglang.srt.disaggregation.kv_events", "ZmqEventPublisher._publisher_thread")
        eng.fn("sglang.srt.disaggregation.kv_events", "ZmqEventPublisher._service_replay")
        self.offset = eng.fn("sglang.srt.disaggregation.kv_events", "ZmqEventPublisher.offset_endpoint_port",
                             ["endpoint", "data_parallel_rank"])
        self.select_rank = eng.fn("sglang.srt.disaggregation.kv_events", "select_kv_publisher_dp_rank",
                                  ["attn_dp_size", "attn_dp_rank", "dp_rank"])
        self.pubmod = eng.module("sglang.srt.managers.scheduler_components.kv_events_publisher")
        self.SchedPub = eng.fn("sglang.srt.managers.scheduler_components.kv_events_publisher",
                               "SchedulerKvEventsPublisher")
        eng.fn("sglang.srt.managers.scheduler_components.kv_events_publisher",
               "SchedulerKvEventsPublisher.publish_kv_events")
        self.clock = types.SimpleNamespace(now=T0, time=None)
        self.clock.time = lambda: self.clock.now
        self.pubmod.time = self.clock  # the files' fixed batch time (see the module doc)
        self.n = 0

    # -- the engine's pieces ---------------------------------------------------------------

    def cache(self, page_size, is_eagle=False, allocator=None):
        p = self.cip.CacheInitParams(disable=False, req_to_token_pool=None,
                                     token_to_kv_pool_allocator=allocator or Allocator(),
                                     page_size=page_size, is_eagle=is_eagle, enable_kv_cache_events=True)
        return self.RadixCache(p)

    def key(self, op, ids=None):
        ids = array("q", op["token_ids"] if ids is None else ids)
        kw = {}
        if op.get("cache_salt") is not None:
            kw["cache_salt"] = op["cache_salt"]
        return self.RadixKey(ids, op.get("extra_key"), **kw)

    def insert(self, cache, op):
        k = self.key(op)
        return cache.insert(self.bp.InsertParams(key=k, value=Idx(range(len(k.token_ids)))))

    def publisher(self, cache, topic="", rank=0, replay=False):
        """The scheduler's publisher component over `cache`, on inproc sockets, and a SUB
        socket on its endpoint."""
        self.n += 1
        cfg = {"publisher": "zmq", "endpoint": f"inproc://kit-sgl-{os.getpid()}-{self.n}", "topic": topic}
        if replay:
            cfg["replay_endpoint"] = f"inproc://kit-sgl-replay-{os.getpid()}-{self.n}"
        ps = types.SimpleNamespace(pp_rank=0, attn_tp_rank=0, attn_cp_rank=0, attn_dp_size=rank + 1 if rank else 1,
                                   attn_dp_rank=rank, dp_rank=None)
        kw = dict(kv_events_config=json.dumps(cfg), tree_cache=cache, send_metrics_from_scheduler=None,
                  max_running_requests=1, max_total_num_tokens=1, get_stats=lambda: None)
        fields = self.SchedPub.__dataclass_fields__
        if "ps" in fields:  # <= 0.5.19: the scheduler hands its parallel state over
            kw.update(ps=ps, attn_tp_rank=0, attn_cp_rank=0, attn_dp_rank=rank, dp_rank=None)
        else:  # later: read from the runtime context (`get_parallel()`), which the kit sets
            for mod in (self.pubmod, self.kv):
                if hasattr(mod, "get_parallel"):
                    mod.get_parallel = lambda: ps
            self.eng.standins = sorted(set(getattr(self.eng, "standins", [])) | {"runtime_context.get_parallel"})
        import dataclasses

        missing = [f for f, d in fields.items() if f not in kw and d.default is dataclasses.MISSING
                   and d.default_factory is dataclasses.MISSING]
        if missing:
            raise EngineChanged("sglang.srt.managers.scheduler_components.kv_events_publisher:SchedulerKvEventsPublisher: "
                                f"fields {missing} the kit does not supply")
        sp = self.SchedPub(**kw)
        zp = sp.kv_event_publisher
        atexit.unregister(zp.shutdown)  # the kit shuts each one down itself
        sent = []
        real = zp.publish

        def spy(batch):  # keeps the published objects (their classes) for the decode fields
            sent.append(batch)
            real(batch)

        zp.publish = spy
        sub = zmq.Context.instance().socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.setsockopt(zmq.RCVTIMEO, 5000)
        sub.connect(zp._endpoint)
        time.sleep(0.2)  # the SUB socket joins before anything is published
        return sp, zp, sub, sent

    def step(self, sp, zp, sub, sent, ts, step_no):
        """The scheduler's end-of-step publish; the batch as the file records it."""
        self.clock.now = ts
        before = len(sent)
        sp.publish_kv_events()
        if len(sent) == before:
            return {"step": step_no, "published": False, "note": NOT_PUBLISHED}
        frames = sub.recv_multipart()
        b = self.batch(frames, sent[-1])
        b["step"] = step_no
        return b

    # -- what a batch looks like in the file --------------------------------------------------

    def event_json(self, ev):
        cls = type(ev).__name__
        tag = ev.__struct_config__.tag
        j = {"type": tag, "python_class": cls}
        for f in ev.__struct_fields__:
            v = getattr(ev, f)
            if f == "medium" and v is not None:
                v = getattr(v, "value", v)
            if f == "metadata" and v is not None:
                v = {g: getattr(v, g) for g in v.__struct_fields__}
            j[f] = jsonable(v)
            if f == "block_hashes":
                j["block_hashes_str"] = [str(x) for x in v]
                j["block_hashes_u64_hex"] = [u64hex(x) for x in v]
            if f == "parent_block_hash":
                j["parent_block_hash_str"] = None if v is None else str(v)
                j["parent_block_hash_u64_hex"] = u64hex(v)
        j["wire_field_order"] = ["<tag>"] + list(ev.__struct_fields__)
        return j

    def typed(self, payload):
        try:
            t = msgspec.msgpack.decode(payload, type=self.Batch)
        except Exception as e:
            return {"ok": False, "exception": type(e).__name__, "message": str(e)}, None
        return t, msgspec.msgpack.Encoder().encode(t)

    def batch(self, frames, obj):
        payload = frames[2]
        seq = int.from_bytes(frames[1], "big")
        t, again = self.typed(payload)
        if again is None:
            td = t
        else:
            lost = []
            for a, b in zip(obj.events, t.events):
                for f in a.__struct_fields__:
                    if f not in b.__struct_fields__ and f not in lost:
                        lost.append(f)
            td = {"ok": True, "same_as_published": again == payload, "fields_lost": lost}
        return {
            "frames_hex": [f.hex() for f in frames],
            "topic_utf8": frames[0].decode(),
            "seq": seq,
            "seq_str": str(seq),
            "payload_hex": payload.hex(),
            "payload_len": len(payload),
            "decoded": {"ts": obj.ts, "events": [self.event_json(e) for e in obj.events], "attn_dp_rank": obj.attn_dp_rank},
            "sglang_typed_decode": td,
            "msgpack_generic": msgspec.msgpack.decode(payload),
        }

    # -- the scenario -------------------------------------------------------------------------

    def steps_of(self, case):
        ops = case["inputs"]["operations"]
        if case["name"] == "coalescing_one_step":  # "Three inserts in one scheduler step"
            return [ops[:1], ops[1:]]
        return [[o] for o in ops]

    def run_case(self, case):
        inp = case["inputs"]
        rank = inp.get("attn_dp_rank", 0)
        sp, zp, sub, sent = self.publisher(None, inp.get("topic", ""), rank)
        cache = None
        endpoint = self.offset(inp["kv_events_config"]["endpoint"], rank)
        batches = []
        node = None
        for i, ops in enumerate(self.steps_of(case)):
            for op in ops:
                k = op["op"]
                if k in ("init", "init_and_drop_initial_clear"):
                    # A fresh cache: its constructor's reset queues AllBlocksCleared.
                    cache = self.cache(inp["page_size"], inp.get("is_eagle", False))
                    sp.tree_cache = cache
                    if k == "init_and_drop_initial_clear":
                        cache.take_events()
                elif k == "insert":
                    node = self.insert(cache, op).last_device_node
                elif k == "insert_then_record_store_cpu":
                    node = self.insert(cache, op).last_device_node
                    cache.take_events()  # the GPU store the file's batch does not hold
                    cache.kv_events.record_store(node, medium=self.Medium.CPU)
                elif k == "record_remove_cpu_then_gpu":
                    cache.kv_events.record_remove(node, medium=self.Medium.CPU)
                    cache.kv_events.record_remove(node, medium=self.Medium.GPU)
                elif k == "evict_all":
                    cache.evict(self.bp.EvictParams(num_tokens=cache.evictable_size() + 1))
                elif k == "reset":
                    cache.reset()
                else:
                    raise EngineChanged(f"kit: operation {k} of case {case['name']} is not driven")
            batches.append(self.step(sp, zp, sub, sent, T0 + i, i))
        zp.shutdown()
        sub.close()
        return {"expected": {"batches": batches}, "publisher_endpoint": endpoint}

    def run_replay(self, case):
        inp = case["inputs"]
        cache = self.cache(16)
        cache.take_events()
        sp, zp, sub, sent = self.publisher(cache, replay=True)
        live = []
        for i, ids in enumerate(inp["inserted_token_ids_per_batch"]):
            self.insert(cache, {"token_ids": ids})
            self.clock.now = T_REPLAY + i
            sp.publish_kv_events()
            live.append([f.hex() for f in sub.recv_multipart()])
        d = zmq.Context.instance().socket(zmq.DEALER)
        d.setsockopt(zmq.RCVTIMEO, 5000)
        d.connect(zp._replay_endpoint)
        req = [b"", inp["start_seq"].to_bytes(8, "big")]
        d.send_multipart(req)
        got = []
        while True:
            f = d.recv_multipart()
            got.append([x.hex() for x in f])
            if f[-2] == b"\xff" * 8:  # [empty, (topic,) seq, payload]
                break
        d.close()
        zp.shutdown()
        sub.close()
        return {"expected": {"live_frames_hex": live, "client_request_frames_hex": [x.hex() for x in req],
                             "client_received_frames_hex": got}}

    def run_edges(self, case):
        """Boundary values through the release's classes and publisher (no cache involved)."""
        cache = self.cache(16)
        cache.take_events()
        sp, zp, sub, sent = self.publisher(cache)
        M = self.Medium
        evs = [
            self.BlockStored(block_hashes=[-1, 0, 2**63 - 1, -(2**63)], parent_block_hash=None, token_ids=[1, 2],
                             block_size=16, lora_id=None, medium=None),
            self.BlockStored(block_hashes=[127, 128, 2**32, 2**32 - 1], parent_block_hash=-129, token_ids=[0],
                             block_size=16, lora_id=7, medium=M.GPU),
            self.BlockRemoved(block_hashes=[5], medium=None),
            self.BlockRemoved(block_hashes=[-5], medium=None),
            self.AllCleared(),
        ]
        cache.kv_events._queue = []
        for e in evs:
            cache.kv_events._queue.append(e)  # as built: no coalescing across these
        b = self.step(sp, zp, sub, sent, T_EDGES, 0)
        zp.shutdown()
        sub.close()
        return {"expected": {"batches": [b]}}

    def run(self, doc):
        out = {}
        for c in doc["cases"]:
            if c["name"] == "replay_from_seq_1":
                out[c["name"]] = self.run_replay(c)
            elif c["inputs"].get("synthetic"):
                out[c["name"]] = self.run_edges(c)
            elif "operations" in c["inputs"]:
                out[c["name"]] = self.run_case(c)
        header = {
            "endpoint_offset_examples": [
                {"endpoint": x["endpoint"], "rank": x["rank"], "result": self.offset(x["endpoint"], x["rank"])}
                for x in doc.get("endpoint_offset_examples", [])],
            "publisher_rank_examples": [
                {**{k: x[k] for k in ("attn_dp_size", "attn_dp_rank", "dp_rank")},
                 "publisher_rank": self.select_rank(x["attn_dp_size"], x["attn_dp_rank"], x["dp_rank"])}
                for x in doc.get("publisher_rank_examples", [])],
        }
        return header, out


def compare(exp_doc, got_doc):
    """(reproduced, total, [(case, field paths)]): every case's `expected`, field for field,
    its publisher endpoint, and each header example."""
    from .qualify import diff_case

    got = {c["name"]: c for c in got_doc["cases"]}
    ok, bad, total = 0, [], 0
    for c in exp_doc["cases"]:
        total += 1
        g = got.get(c["name"])
        if g is None:
            bad.append((c["name"], ["(not produced)"]))
            continue
        d = diff_case(c["expected"], g["expected"])
        pe = c["inputs"].get("publisher_endpoint")
        if pe is not None and pe != g.get("publisher_endpoint"):
            d.append("inputs.publisher_endpoint")
        if d:
            bad.append((c["name"], d))
        else:
            ok += 1
    for k in ("endpoint_offset_examples", "publisher_rank_examples"):
        for i, x in enumerate(exp_doc.get(k, [])):
            total += 1
            y = got_doc.get(k, [])
            if i < len(y) and y[i] == x:
                ok += 1
            else:
                bad.append((f"{k}[{i}]", [json.dumps(x)]))
    return ok, total, bad
