"""SGLang KV-event namespaces (0.5.22: `--kv-events-config` format `dynamo`; 0.5.23: also the
default format, for LoRA adapters whose name the scheduler registered), by the release's own
code: a `RadixCache` with events on (`CacheInitParams.dynamo_kv_event_format`,
`kv_event_lora_names`, the release's `LoRANameTable` / `KvEventLoraNames` filled as the
scheduler fills it) takes a prompt and then its extension (so the second store's parent is a
namespaced hash too) under each namespace case; the events its recorder queued are
written with, per published hash, the page digest it started from
(`compute_node_event_hash_values` / `hash_value`, `hash_str_to_int64`), the seed
(`kv_event_namespace_seed(extra_key, cache_salt)`) and `namespaced_block_hash`'s result.

The file is new (no expected values exist yet): `sglang-<version>-namespaces.json` under the
run's output folder, with the kit header (engine functions run, their sources' sha256). The
kit checks that each published hash equals `namespaced_block_hash(page hash, seed)` with the
seed the case's key gives, and that a case with no namespace publishes the plain page hash.
"""

import os
import random
import types
from array import array

from .sglang_events import Allocator, Idx, torch_standins

LORA_ID = "1cff3cf8d960c8bf494d7092319d7246"  # a 32-hex lora_id, as Req appends to extra_key
LORA_NAME = "sql-lora"


def cases():
    rng = random.Random(20261207)
    ids = [rng.randrange(1, 151000) for _ in range(48)]
    out = []
    for fmt in ("default", "dynamo"):
        for name, extra, salt, registered in [
            ("plain", None, None, False),
            ("lora_registered", LORA_ID, None, True),
            ("lora_unregistered", LORA_ID, None, False),
            ("lora_registered_salt", LORA_ID, "tenant-a", True),
            ("salt_only", None, "tenant-a", False),
            ("lora_registered_extra_prefix", "session-7:" + LORA_ID, None, True),
        ]:
            out.append({"name": f"{fmt}_{name}", "inputs": {
                "kv_events_format": fmt, "page_size": 16, "token_ids": ids[:32], "extension_token_ids": ids,
                "extra_key": extra, "cache_salt": salt, "lora_id": LORA_ID if extra else None,
                "lora_name": LORA_NAME if registered else None}})
    return out


class Namespaces:
    def __init__(self, eng):
        self.eng = eng
        torch_standins(eng)
        self.kv = eng.module("sglang.srt.disaggregation.kv_events")
        self.ev = eng.module("sglang.srt.mem_cache.events")
        self.bp = eng.module("sglang.srt.mem_cache.base_prefix_cache")
        self.cip = eng.module("sglang.srt.mem_cache.cache_init_params")
        self.seed = eng.fn("sglang.srt.disaggregation.kv_events", "kv_event_namespace_seed", ["extra_key", "cache_salt"])
        self.ns = eng.fn("sglang.srt.disaggregation.kv_events", "namespaced_block_hash", ["block_hash", "namespace_seed"])
        self.RadixCache = eng.fn("sglang.srt.mem_cache.radix_cache", "RadixCache", ["params"])
        self.RadixKey = eng.fn("sglang.srt.mem_cache.radix_cache", "RadixKey", ["token_ids", "extra_key"])
        eng.fn("sglang.srt.mem_cache.events", "KVCacheEventRecorder._namespace_seed", ["node"])
        eng.fn("sglang.srt.mem_cache.events", "KVCacheEventRecorder.record_store", ["node", "medium"])
        self.to_int64 = eng.fn("sglang.srt.mem_cache.utils", "hash_str_to_int64", ["hash_str"])
        self.Table = (eng.fn("sglang.srt.mem_cache.events", "KvEventLoraNames")
                      if hasattr(self.ev, "KvEventLoraNames") else eng.fn("sglang.srt.mem_cache.events", "LoRANameTable"))

    def table(self, inp):
        t = self.Table()
        if inp["lora_name"]:
            if self.Table.__name__ == "KvEventLoraNames":  # 0.5.23: the scheduler registers per request
                t.register(types.SimpleNamespace(extra_key=inp["extra_key"], lora_id=inp["lora_id"]), inp["lora_name"])
            else:  # 0.5.22: adapter id -> name, matched on extra_key's last 32 characters
                t.register(lora_id=inp["lora_id"], lora_name=inp["lora_name"])
        return t

    def case(self, inp):
        p = self.cip.CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=Allocator(),
                                     page_size=inp["page_size"], enable_kv_cache_events=True,
                                     dynamo_kv_event_format=inp["kv_events_format"] == "dynamo",
                                     kv_event_lora_names=self.table(inp))
        c = self.RadixCache(p)
        c.take_events()
        nodes = []
        for ids in (inp["token_ids"], inp["extension_token_ids"]):
            kw = {"cache_salt": inp["cache_salt"]} if inp["cache_salt"] else {}
            k = self.RadixKey(array("q", ids), inp["extra_key"], **kw)
            nodes.append(c.insert(self.bp.InsertParams(key=k, value=Idx(range(len(ids))))).last_device_node)
        events = c.take_events()
        rec = c.kv_events
        seed = rec._namespace_seed(nodes[-1])
        pages = []
        for n in nodes:
            base = [self.to_int64(h) for h in rec._node_event_hash_values(n)]
            for b in base:
                pages.append({"page_hash": b, "published": self.ns(b, namespace_seed=seed)})
        out_events = []
        for e in events:
            j = {"type": type(e).__name__}
            for f in e.__struct_fields__:
                v = getattr(e, f)
                j[f] = getattr(v, "value", v) if f == "medium" else ([list(x) if isinstance(x, tuple) else x for x in v]
                                                                      if f == "token_ids" else v)
            out_events.append(j)
        published = [h for e in events for h in getattr(e, "block_hashes", [])]
        want_seed = self.seed(extra_key=inp["extra_key"], cache_salt=inp["cache_salt"])
        checks = {
            "published_are_namespaced_page_hashes": published == [p["published"] for p in pages],
            "parent_namespaced": len(events) < 2 or events[1].parent_block_hash == pages[1]["published"],
            "seed_is_key_seed": seed in (None, want_seed, self.seed(extra_key=inp["extra_key"], cache_salt=None)),
        }
        return {"namespace_seed_hex": None if seed is None else seed.hex(),
                "seed_of_extra_key_and_salt_hex": None if want_seed is None else want_seed.hex(),
                "namespaced": seed is not None, "pages": pages, "events": out_events, "kit_checks": checks}


def run(eng):
    if not hasattr(eng.module("sglang.srt.disaggregation.kv_events"), "kv_event_namespace_seed"):
        return None
    n = Namespaces(eng)
    cs = [{**c, "expected": n.case(c["inputs"])} for c in cases()]
    return {"engine": "sglang", "engine_version": eng.version, "generator": "kit/sglang_namespaces.py",
            "rule": ("seed = sha256(b'sglang-kv-event-namespace-v1' + part(extra_key) + part(cache_salt)), "
                     "part(None) = 00, part(s) = 01 + len(utf8(s)) as u64 LE + utf8(s); published = first 8 bytes of "
                     "sha256(seed + page_hash as 8-byte big-endian signed) as int64; parent likewise"),
            "cases": cs}
