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
  allocation, each decode step); a step without events publishes nothing. Its `seq` (the
  endpoint's publisher counts the batches it sent, from 0) and `phase` are compared too.

Files with a `deployment` header (`specdec-l1`, `specdec-l3`: speculative decoding with prefix
caching) are replayed with the deployment's own setup. First the release derives the
deployment's values from the header's `speculative` config with its own `SpeculativeConfig` /
`VllmConfig` methods and properties, run over stand-ins (`derive`); they are compared with the
header's (a difference fails the file, named `deployment.<key>`) and used as the release's
`Scheduler.__init__` and `Scheduler.schedule` use them: the request block hasher is
`get_request_block_hasher(block_size, hash_fn, num_hash_lookahead_tokens)`; each endpoint's
`KVCacheManager` gets `use_eagle` (the scheduler's `use_eagle_block_drop`, which it clears when
hashes look ahead), `num_hash_lookahead_tokens` and `num_prefill_lookahead` (its coordinator then
treats the last `num_prefill_lookahead - 1` computed tokens as re-prefillable and its BlockPool
publishes `lookahead_token_ids`); every `allocate_slots` (the prompt's and each decode step's)
reserves `num_lookahead_tokens` slots past the scheduled tokens, as the scheduler passes
`num_lookahead_tokens=self.num_lookahead_tokens` on both of its paths. Decode schedules one
verified token a step and no draft tokens: the files' generator's choice, which the inputs do
not record (scheduling `1 + num_speculative_tokens` a step, drafts rejected, gives other event
batches). A deployment whose keys the kit does not know, one with a KV connector or one
without prefix caching is not replayed (`unsupported` names why; qualify reports the file as
skipped, loudly).
"""

import functools
import inspect
import os
import types
from types import SimpleNamespace

import msgspec

from .engine import EngineChanged

# The `deployment` keys (and `speculative` keys) the kit replays; anything else is refused.
DEPLOYMENT_KEYS = {"speculative", "enable_prefix_caching", "kv_transfer_config", "num_hash_lookahead_tokens",
                   "num_prefill_lookahead_tokens", "num_lookahead_tokens", "use_eagle_block_drop"}
SPECULATIVE_KEYS = {"method", "num_speculative_tokens", "num_nextn_predict_layers", "multi_module_mtp",
                    "disable_eagle_block_drop", "disable_lookahead_block_hashes"}


class Standin:
    """Plain attributes, with an engine config class's own methods and properties over them (the
    kit builds no `VllmConfig` / `SpeculativeConfig`: their validators load the model's config)."""

    def __init__(self, cls, **attrs):
        self.__dict__.update(attrs)
        self.__dict__["_cls"] = cls

    def __getattr__(self, name):
        v = inspect.getattr_static(self._cls, name)  # AttributeError when the class has none
        if isinstance(v, property):
            return v.fget(self)
        if isinstance(v, functools.cached_property):
            return v.func(self)
        if isinstance(v, (staticmethod, classmethod)):
            return getattr(self._cls, name)
        if callable(v):
            return types.MethodType(v, self)
        return v


def unsupported(doc):
    """Why the kit cannot replay this file's `deployment` (None: it can, or there is none)."""
    dep = doc.get("deployment")
    if dep is None:
        return None
    extra = sorted(set(dep) - DEPLOYMENT_KEYS) + sorted(f"speculative.{k}" for k in set(dep.get("speculative") or {}) - SPECULATIVE_KEYS)
    if extra:
        return f"deployment keys the kit does not replay: {', '.join(extra)}"
    if dep.get("kv_transfer_config") is not None:
        return "deployment with a KV connector (kv_transfer_config): not replayed"
    if dep.get("enable_prefix_caching") is False:
        return "deployment without prefix caching: not replayed"
    missing = [k for k in ("num_hash_lookahead_tokens", "num_prefill_lookahead_tokens", "num_lookahead_tokens",
                           "use_eagle_block_drop") if not isinstance(dep.get(k), (int, bool))]
    if missing:
        return f"deployment without {', '.join(missing)}"
    return None


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
        self.deployment_fns = False
        self.derived = None  # the release's derived deployment values, against the header's (one file)

    def derive(self, dep):
        """What the release derives from the deployment's speculative config, by its own
        `SpeculativeConfig` / `VllmConfig` code run over stand-ins holding the header's
        `speculative` values (the draft's `n_predict` = `num_nextn_predict_layers`, as the
        release's `SpeculativeConfig.hf_config_override` writes it for MTP drafts), and the
        scheduler's rule (`Scheduler.__init__`: lookahead hashes clear `use_eagle_block_drop`)."""
        SC = self.eng.fn("vllm.config.speculative", "SpeculativeConfig")
        VC = self.eng.fn("vllm.config.vllm", "VllmConfig")
        for q in ("use_eagle", "use_eagle_block_drop", "use_multi_module_mtp"):
            self.eng.fn("vllm.config.speculative", f"SpeculativeConfig.{q}")
        for q in ("num_speculative_tokens", "num_lookahead_tokens", "num_prefill_lookahead_tokens"):
            self.eng.fn("vllm.config.vllm", f"VllmConfig.{q}")
        sp = dep["speculative"]
        hf = SimpleNamespace(model_type=None)
        if "num_nextn_predict_layers" in sp:
            hf.num_nextn_predict_layers = hf.n_predict = sp["num_nextn_predict_layers"]
        spec = Standin(SC, method=sp["method"], num_speculative_tokens=sp["num_speculative_tokens"],
                       disable_eagle_block_drop=sp.get("disable_eagle_block_drop", False),
                       disable_lookahead_block_hashes=sp.get("disable_lookahead_block_hashes", False),
                       custom_method=None, index_share_for_mtp_iteration=None,
                       num_speculative_tokens_per_batch_size=None, draft_model_config=SimpleNamespace(hf_config=hf))
        vc = Standin(VC, speculative_config=spec, kv_transfer_config=dep.get("kv_transfer_config"), diffusion_config=None,
                     cache_config=SimpleNamespace(enable_prefix_caching=dep.get("enable_prefix_caching", True)))
        if isinstance(inspect.getattr_static(VC, "num_hash_lookahead_tokens", None), property):
            self.eng.fn("vllm.config.vllm", "VllmConfig.num_hash_lookahead_tokens")
            la = vc.num_hash_lookahead_tokens  # 0.33
        else:  # 0.34: resolved once the configs are final, into a field
            self.eng.fn("vllm.config.vllm", "VllmConfig._resolve_num_hash_lookahead_tokens")
            la = vc._resolve_num_hash_lookahead_tokens()
        return {
            "num_hash_lookahead_tokens": la,
            "num_prefill_lookahead_tokens": vc.num_prefill_lookahead_tokens,
            "num_lookahead_tokens": vc.num_lookahead_tokens,
            "use_eagle_block_drop": bool(spec.use_eagle_block_drop()) and not la,
            "speculative.multi_module_mtp": bool(spec.use_multi_module_mtp()),
        }

    def deployment(self, doc):
        """The file's deployment (None: no speculative decoding), with the values the release
        derives (`derive`) in place of the header's; the engine functions it needs are checked
        (parameters) and recorded the first time."""
        dep = doc.get("deployment")
        if not dep:
            return None
        if self.derived is None or self.derived["doc"] is not doc:
            d = self.derive(dep)
            stated = {k: (dep["speculative"].get(k.split(".", 1)[1]) if k.startswith("speculative.") else dep.get(k))
                      for k in d}
            # A value the header leaves out (multi_module_mtp for EAGLE) is not compared.
            self.derived = {"doc": doc, "values": d, "same": sum(stated[k] == v for k, v in d.items() if stated[k] is not None),
                            "total": sum(stated[k] is not None for k in d),
                            "differ": [f"deployment.{k}: the release derives {v}, the header says {stated[k]}"
                                       for k, v in d.items() if stated[k] is not None and stated[k] != v]}
        dep = {**dep, **{k: v for k, v in self.derived["values"].items() if "." not in k}}
        if not self.deployment_fns:
            self.eng.fn("vllm.v1.core.kv_cache_utils", "get_request_block_hasher",
                        ["hash_block_size", "caching_hash_fn", "num_hash_lookahead_tokens"])
            self.eng.fn("vllm.v1.core.kv_cache_manager", "KVCacheManager.allocate_slots",
                        ["request", "num_new_tokens", "num_new_computed_tokens", "new_computed_blocks",
                         "num_lookahead_tokens"])
            self.eng.fn("vllm.v1.core.kv_cache_coordinator", "KVCacheCoordinator.get_num_cacheable_tokens")
            self.eng.fn("vllm.v1.core.block_pool", "BlockPool")
            self.deployment_fns = True
        return dep

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
        dep = self.deployment(doc)
        if dep:
            for k in ("use_eagle", "num_hash_lookahead_tokens", "num_prefill_lookahead"):
                if k not in params:
                    raise EngineChanged(f"vllm.v1.core.kv_cache_manager:KVCacheManager: no parameter {k} "
                                        f"in {self.eng.version} (the deployment replay passes it)")
            kw["use_eagle"] = dep["use_eagle_block_drop"]
            kw["num_hash_lookahead_tokens"] = dep["num_hash_lookahead_tokens"]
            kw["num_prefill_lookahead"] = dep["num_prefill_lookahead_tokens"]
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
        dep = self.deployment(doc)
        la = (dep or {}).get("num_hash_lookahead_tokens") or 0
        hasher = (self.h.kcu.get_request_block_hasher(doc["block_size"], hash_fn, la) if la
                  else self.h.kcu.get_request_block_hasher(doc["block_size"], hash_fn))
        return self.Request(
            f"kit-{self.n}", list(step["token_ids"]), self.SP(max_tokens=max_tokens), None,
            lora_request=lora, cache_salt=step.get("cache_salt"),
            block_hasher=hasher,
        )

    def run(self, doc):
        os.environ["PYTHONHASHSEED"] = doc["hash_seed"]
        os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = doc["hash_env"].get("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1")
        self.h.kcu.init_none_hash(self.h.hashing.get_hash_fn_by_name(doc["hash_algo"]))
        if bytes(self.h.kcu.NONE_HASH).hex() != doc["none_hash_hex"]:
            raise ValueError("kit: NONE_HASH differs from the file's header")
        eps = {e: self.manager(doc) for e in doc["endpoints"]}
        dep = self.deployment(doc)
        self.deployment_report = None
        if dep:
            self.deployment_report = {k: v for k, v in self.derived.items() if k != "doc"}
        pending = {e: [] for e in eps}  # (phase, events) batches not yet matched
        seq = {e: 0 for e in eps}  # each endpoint's publisher: the batches it sent
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
                look = {}
                if dep:
                    look["num_lookahead_tokens"] = dep["num_lookahead_tokens"]
                if m.allocate_slots(r, n - hit, hit, blocks, **look) is None:
                    raise RuntimeError(f"kit: step {i}: no blocks for the prompt")
                r.num_computed_tokens = n
                pending[e].append(("prefill", m.take_events()))
                outs = s["output_token_ids"]
                for t in outs[:-1]:
                    r.append_output_token_ids(t)
                    if m.allocate_slots(r, 1, **look) is None:
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
                out["seq"] = seq[e]
                out["seq_frame_hex"] = seq[e].to_bytes(8, "big").hex()
                seq_ok = out["seq"] == s["seq"] and out["seq_frame_hex"] == s.get("seq_frame_hex", out["seq_frame_hex"])
                seq[e] += 1
                if got == want and phase == s["phase"] and seq_ok:
                    ok += 1
                else:
                    bad += 1
                    what = [w for w, bad_ in (("payload", got != want), ("phase", phase != s["phase"]), ("seq", not seq_ok)) if bad_]
                    fails.append(f"events step {i} on {e} ({s['phase']}, seq {s['seq']}): {', '.join(what)} differs "
                                 f"({phase}, seq {out['seq']})")
                    if os.environ.get("KIT_DEBUG"):
                        fails.append(f"    want {msgspec.msgpack.decode(want)}")
                        fails.append(f"    got  {msgspec.msgpack.decode(got)}")
        for e, p in pending.items():
            if any(evs for _, evs in p):
                bad += 1
                fails.append(f"{e}: events left unpublished")
        self.produced = produced
        if self.deployment_report and self.deployment_report["differ"]:
            bad += 1  # the release derives another deployment than the file's engine did
            fails = self.deployment_report["differ"] + fails
        return ok, ok + bad, fails
