"""SGLang page hashes and the events of an insert, by the release's own code: `RadixCache`
(`create_simulated`'s parameters, with `is_eagle` for the bigram cases) takes the case's key
(`RadixKey`: ids, extra key, cache salt) into an empty cache; the pages are the digests its
nodes carry (`hash_value`, or the salted event hashes via `compute_node_event_hash_values`),
`hash_str_to_int64` gives the published ints, `get_hash_str` the digest of a trailing partial
page; the events are what its `KVCacheEventRecorder` queued. The page digest itself is the
wheel's `hash_binding.cpp`, built unmodified (kit/cppext.py). Error cases: the exception
`get_hash_str` raises, class and message."""

import os
from array import array

COMPARED_PAGE = ["index", "token_start", "token_end", "digest_hex", "block_hash", "parent_block_hash"]
COMPARED_EVENT = ["type", "python_class", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "metadata"]


class SglangHasher:
    def __init__(self, eng):
        self.eng = eng
        self.rc = eng.module("sglang.srt.mem_cache.radix_cache")
        self.bp = eng.module("sglang.srt.mem_cache.base_prefix_cache")
        self.u = eng.module("sglang.srt.mem_cache.utils")
        self.cip = eng.module("sglang.srt.mem_cache.cache_init_params")
        self.RadixCache = eng.fn("sglang.srt.mem_cache.radix_cache", "RadixCache", ["params"])
        self.RadixKey = eng.fn("sglang.srt.mem_cache.radix_cache", "RadixKey", ["token_ids", "extra_key"])
        eng.fn("sglang.srt.mem_cache.radix_cache", "RadixCache.insert", ["params"])
        eng.fn("sglang.srt.mem_cache.radix_cache", "RadixCache.take_events")
        self.get_hash_str = eng.fn("sglang.srt.mem_cache.utils", "get_hash_str", ["token_ids", "prior_hash", "page_size"])
        self.to_int64 = eng.fn("sglang.srt.mem_cache.utils", "hash_str_to_int64", ["hash_str"])
        self.event_hashes = None
        if hasattr(self.u, "compute_node_event_hash_values"):
            self.event_hashes = eng.fn("sglang.srt.mem_cache.utils", "compute_node_event_hash_values")
        eng.fn("sglang.srt.mem_cache.cpp_utils.native_hash", "get_native_hash")

    def case(self, inputs):
        ps = inputs["page_size"]
        # The scheduler's requests hold their ids as int64 arrays (what RadixKey is typed
        # with); the native hash reads such an array as it is and range-checks every id.
        ids = array("q", inputs["token_ids"])
        try:
            self.get_hash_str(ids, None, ps) if ids else None
        except Exception as e:  # the engine's own error on these ids
            return {"error": True, "exception": type(e).__name__, "message": str(e)}
        eagle = inputs.get("mode") == "eagle_bigram"
        params = self.cip.CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=None,
                                          page_size=ps, is_eagle=eagle, enable_kv_cache_events=True)
        cache = self.RadixCache(params)
        cache.take_events()  # the reset's AllBlocksCleared
        kw = {}
        if inputs.get("cache_salt") is not None:
            kw["cache_salt"] = inputs["cache_salt"]
        key = self.RadixKey(ids, inputs.get("extra_key"), **kw)
        res = cache.insert(self.bp.InsertParams(key=key, value=None))
        node = res.last_device_node
        digests = []
        if node is not None and node is not cache.root_node:
            rec = cache.kv_events
            if hasattr(rec, "_node_event_hash_values"):
                # The digests the recorder publishes for the node (the storage chain
                # `node.hash_value` may be namespaced apart, SGLang >= 0.5.20).
                self.eng.fn("sglang.srt.mem_cache.events", "KVCacheEventRecorder._node_event_hash_values")
                digests = list(rec._node_event_hash_values(node))
            elif key.cache_salt is not None and self.event_hashes is not None:
                digests = list(self.event_hashes(node, ps))
            else:
                digests = list(node.hash_value or [])
        unit = 1
        n_units = len(key) if eagle else len(ids)
        pages = []
        parent = None
        for i, d in enumerate(digests):
            b = self.to_int64(d)
            pages.append({"index": i, "token_start": i * ps, "token_end": (i + 1) * ps, "digest_hex": d,
                          "block_hash": b, "parent_block_hash": parent})
            parent = b
        tail = None
        full = (n_units // ps) * ps
        if ps > 1 and n_units % ps and not eagle:
            prior = digests[-1] if digests else None
            t = self.get_hash_str(ids[full:], prior, ps)
            t = t[0] if isinstance(t, list) else t
            tail = {"token_start": full, "token_end": n_units, "digest_hex": t, "would_be_block_hash": self.to_int64(t)}
        events = []
        for ev in cache.take_events():
            j = {"type": type(ev).__name__ if type(ev).__name__ != "BlockStoredWithMetadata" else "BlockStored",
                 "python_class": type(ev).__name__}
            for f in ev.__struct_fields__:
                v = getattr(ev, f)
                if f == "medium" and v is not None:
                    v = getattr(v, "value", v)
                if f == "token_ids":
                    v = [list(x) if isinstance(x, tuple) else x for x in v]
                if f == "metadata" and v is not None:
                    v = {g: getattr(v, g) for g in v.__struct_fields__}
                j[f] = v
            events.append(j)
        return {"num_full_pages": len(pages), "published_token_count": len(pages) * ps, "pages": pages,
                "partial_tail": tail, "events_on_insert_into_empty_cache": events}


def compare_case(exp, got):
    if exp.get("error") or got.get("error"):
        return [k for k in ("error", "exception", "message") if exp.get(k) != got.get(k)]
    d = []
    for k in ("num_full_pages", "published_token_count"):
        if exp[k] != got.get(k):
            d.append(k)
    if len(exp["pages"]) != len(got.get("pages", [])):
        d.append("pages[len]")
    else:
        for i, (a, b) in enumerate(zip(exp["pages"], got["pages"])):
            d += [f"pages[{i}].{k}" for k in COMPARED_PAGE if a.get(k) != b.get(k)]
    et, gt = exp.get("partial_tail"), got.get("partial_tail")
    if (et is None) != (gt is None):
        d.append("partial_tail")
    elif et is not None:
        d += [f"partial_tail.{k}" for k in ("token_start", "token_end", "digest_hex", "would_be_block_hash") if et.get(k) != gt.get(k)]
    ee, ge = exp["events_on_insert_into_empty_cache"], got.get("events_on_insert_into_empty_cache", [])
    if len(ee) != len(ge):
        d.append("events[len]")
    else:
        for i, (a, b) in enumerate(zip(ee, ge)):
            d += [f"events[{i}].{k}" for k in COMPARED_EVENT if k in a and a.get(k) != b.get(k)]
    return d[:8]


def probe(eng, h):
    """SGLang rules the code shows: ids >= 2^32 (wide pages), the event classes' wire form."""
    r = {}
    try:
        h.get_hash_str(array("q", [2**32] * 2), None, 2)
        r["wide_pages"] = True
    except Exception:
        r["wide_pages"] = False
    kv = eng.module("sglang.srt.disaggregation.kv_events")
    bs = eng.fn("sglang.srt.disaggregation.kv_events", "BlockStored")
    eng.fn("sglang.srt.disaggregation.kv_events", "BlockRemoved")
    cfg = getattr(bs, "__struct_config__", None)
    r["event_encoding"] = "array" if cfg is not None and cfg.array_like else "map"
    r["block_stored_fields"] = list(bs.__struct_fields__)
    import hashlib
    import inspect

    r["kv_events_source_sha256"] = hashlib.sha256(inspect.getsource(kv).encode()).hexdigest()
    return r


def run_sglang(eng, inputs_from):
    import json

    h = SglangHasher(eng)
    rules = probe(eng, h)
    files = {}
    src = os.path.join(inputs_from, "block_hashes.json")
    if os.path.exists(src):
        doc = json.load(open(src))
        cases = [{"name": c["name"], "description": c.get("description", ""), "inputs": c["inputs"],
                  "expected": h.case(c["inputs"])} for c in doc["cases"]]
        files["block_hashes.json"] = {"engine": "sglang", "engine_version": eng.version,
                                      "generator": "kit/qualify.py", "cases": cases}
    src = os.path.join(inputs_from, "kv_events.json")
    if os.path.exists(src):
        from .sglang_events import SglangEvents

        doc = json.load(open(src))
        header, produced = SglangEvents(eng).run(doc)
        cases = [{"name": c["name"], "description": c.get("description", ""), "inputs": c["inputs"], **produced[c["name"]]}
                 for c in doc["cases"] if c["name"] in produced]
        files["kv_events.json"] = {"engine": "sglang", "engine_version": eng.version,
                                   "generator": "kit/qualify.py (RadixCache + SchedulerKvEventsPublisher + ZmqEventPublisher)",
                                   **header, "cases": cases}
    from . import sglang_namespaces

    ns = sglang_namespaces.run(eng)
    if ns is not None:  # 0.5.22+: LoRA / salt namespaces of the published hashes (a new file)
        files[f"sglang-{eng.version}-namespaces.json"] = ns
    return rules, files
