"""vLLM cache-hit replays, run through the release's own `KVCacheManager` (coordinators,
`BlockPool`, single-type managers) and `Request`, one manager per endpoint.

For each step of a `cachehit/*.json` file, in order:
* `query`: a fresh `Request` of the query's ids (LoRA, salt) on every endpoint;
  `get_computed_blocks` gives the cached tokens the engine reports (compared with
  `expected_cached_tokens`);
* `run`: the request runs on its endpoint as the scheduler runs one request alone: the prefix
  lookup (compared with the step's `cached_tokens`), `allocate_slots` for the rest of the
  prompt (blocks cached), then each output token but the last appended and computed one step at
  a time (`allocate_slots(request, 1)`), then `free`;
* `events`: the events the manager produced since the last batch of that endpoint
  (`take_events`, stamped by the manager), encoded as `KVEventBatch` with the step's own
  timestamp by msgspec's encoder as `ZmqEventPublisher` encodes them; compared byte for byte
  with the step's payload. A batch is taken after each scheduler step (the prompt's
  allocation, each decode step); a step without events publishes nothing.
"""

import inspect
import os

import msgspec


class Replay:
    def __init__(self, eng, hasher):
        self.eng = eng
        self.h = hasher
        iface = eng.module("vllm.v1.kv_cache_interface")
        self.iface = iface
        self.Manager = eng.fn("vllm.v1.core.kv_cache_manager", "KVCacheManager", ["kv_cache_config", "max_model_len"])
        eng.fn("vllm.v1.core.kv_cache_manager", "KVCacheManager.get_computed_blocks", ["request"])
        eng.fn("vllm.v1.core.kv_cache_manager", "KVCacheManager.allocate_slots",
               ["request", "num_new_tokens", "num_new_computed_tokens", "new_computed_blocks"])
        eng.fn("vllm.v1.core.kv_cache_manager", "KVCacheManager.free", ["request"])
        eng.fn("vllm.v1.core.kv_cache_manager", "KVCacheManager.take_events")
        self.Request = eng.fn("vllm.v1.request", "Request", ["request_id", "prompt_token_ids", "sampling_params", "pooling_params"])
        eng.fn("vllm.v1.request", "Request.append_output_token_ids")
        self.SP = eng.fn("vllm.sampling_params", "SamplingParams")
        self.Lora = eng.fn("vllm.lora.request", "LoRARequest")
        self.Batch = eng.fn("vllm.distributed.kv_events", "KVEventBatch")
        self.enc = msgspec.msgpack.Encoder()
        self.n = 0
        self.torch = __import__("torch")

    def manager(self, doc):
        groups = []
        for g in doc["kv_cache_groups"]:
            common = dict(block_size=g["block_size"], num_kv_heads=1, head_size=64, dtype=self.torch.float16)
            if g["spec"] == "FullAttentionSpec":
                spec = self.eng.fn("vllm.v1.kv_cache_interface", "FullAttentionSpec")(**common)
            elif g["spec"] == "SlidingWindowSpec":
                spec = self.eng.fn("vllm.v1.kv_cache_interface", "SlidingWindowSpec")(**common, sliding_window=g["kv_cache_spec_sliding_window"])
            else:
                raise ValueError(f"kit: KV-cache group spec {g['spec']} not replayed")
            groups.append(self.iface.KVCacheGroupSpec([f"layers.{g['group_idx']}"], spec))
        kw = {}
        if "prefix_cache_retention_interval" in doc and "prefix_cache_retention_interval" in inspect.signature(self.iface.KVCacheConfig).parameters:
            kw["prefix_cache_retention_interval"] = doc["prefix_cache_retention_interval"]
        cfg = self.iface.KVCacheConfig(num_blocks=doc["num_gpu_blocks"], kv_cache_tensors=[], kv_cache_groups=groups, **kw)
        params = inspect.signature(self.Manager.__init__).parameters
        kw = dict(enable_caching=True, enable_kv_cache_events=True, log_stats=False)
        bs = doc["block_size"]
        if "hash_block_size" in params:
            kw["hash_block_size"] = bs
        if "scheduler_block_size" in params:
            kw["scheduler_block_size"] = bs
        return self.Manager(cfg, 1 << 16, **kw)

    def request(self, doc, step, max_tokens=16):
        self.n += 1
        lora = None
        if step.get("lora_name"):
            a = next(x for x in doc.get("lora_adapters", []) if x["lora_name"] == step["lora_name"])
            lora = self.Lora(a["lora_name"], a["lora_int_id"], a["lora_path"])
        hash_fn = self.h.hashing.get_hash_fn_by_name(doc["hash_algo"])
        return self.Request(
            f"kit-{self.n}", list(step["token_ids"]), self.SP(max_tokens=max_tokens), None,
            lora_request=lora, cache_salt=step.get("cache_salt"),
            block_hasher=self.h.kcu.get_request_block_hasher(doc["block_size"], hash_fn),
        )

    def run(self, doc):
        os.environ["PYTHONHASHSEED"] = doc["hash_seed"]
        os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = doc["hash_env"].get("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1")
        self.h.kcu.init_none_hash(self.h.hashing.get_hash_fn_by_name(doc["hash_algo"]))
        if bytes(self.h.kcu.NONE_HASH).hex() != doc["none_hash_hex"]:
            raise ValueError("kit: NONE_HASH differs from the file's header")
        eps = {e: self.manager(doc) for e in doc["endpoints"]}
        pending = {e: [] for e in eps}  # (phase, events) batches not yet matched
        ok = bad = 0
        fails = []
        produced = []  # the steps with the engine's values in place of the file's
        for i, s in enumerate(doc["steps"]):
            out = dict(s)
            produced.append(out)
            if s["kind"] == "query":
                out["expected_cached_tokens"] = {}
                for e, m in eps.items():
                    r = self.request(doc, s)
                    got = m.get_computed_blocks(r)[1]
                    out["expected_cached_tokens"][e] = got
                    want = s["expected_cached_tokens"][e]
                    if got == want:
                        ok += 1
                    else:
                        bad += 1
                        fails.append(f"q{s['id']}/{e}: {got} vs {want}")
            elif s["kind"] == "run":
                e = s["endpoint"]
                m = eps[e]
                r = self.request(doc, s, max_tokens=s["max_tokens"])
                res = m.get_computed_blocks(r)
                blocks, hit = res[:2]
                out["cached_tokens"] = hit
                if len(res) > 2 and hasattr(r, "shared_prefix_boundary"):
                    # The scheduler keeps the lookup's shared-prefix junction on the request
                    # (Scheduler.schedule: `request.shared_prefix_boundary`); the
                    # sliding-window group caches the block there.
                    r.shared_prefix_boundary = res[2]
                if hit == s["cached_tokens"]:
                    ok += 1
                else:
                    bad += 1
                    fails.append(f"run step {i} on {e}: {hit} vs {s['cached_tokens']}")
                n = len(s["token_ids"])
                if m.allocate_slots(r, n - hit, hit, blocks) is None:
                    raise RuntimeError(f"kit: step {i}: no blocks for the prompt")
                r.num_computed_tokens = n
                pending[e].append(("prefill", m.take_events()))
                outs = s["output_token_ids"]
                for t in outs[:-1]:
                    r.append_output_token_ids(t)
                    if m.allocate_slots(r, 1) is None:
                        raise RuntimeError(f"kit: step {i}: no block for a decode step")
                    r.num_computed_tokens += 1
                    pending[e].append(("decode", m.take_events()))  # one batch per step
                r.append_output_token_ids(outs[-1])
                m.free(r)
                pending[e].append(("decode", m.take_events()))
            elif s["kind"] == "events":
                e = s["endpoint"]
                want = bytes.fromhex(s["payload_hex"])
                ts = msgspec.msgpack.decode(want)[0]
                while pending[e] and not pending[e][0][1]:
                    pending[e].pop(0)  # phases without events publish nothing
                if not pending[e]:
                    bad += 1
                    fails.append(f"events step {i} on {e}: the kit produced none")
                    out["payload_hex"] = None
                    continue
                phase, evs = pending[e].pop(0)
                got = self.enc.encode(self.Batch(ts=ts, events=evs, data_parallel_rank=s["dp_rank"]))
                out["payload_hex"] = got.hex()
                out["phase"] = phase
                if got == want and phase == s["phase"]:
                    ok += 1
                else:
                    bad += 1
                    fails.append(f"events step {i} on {e} ({s['phase']}): payload differs ({phase})")
                    if os.environ.get("KIT_DEBUG"):
                        fails.append(f"    want {msgspec.msgpack.decode(want)}")
                        fails.append(f"    got  {msgspec.msgpack.decode(got)}")
        for e, p in pending.items():
            if any(evs for _, evs in p):
                bad += 1
                fails.append(f"{e}: events left unpublished")
        self.produced = produced
        return ok, ok + bad, fails
