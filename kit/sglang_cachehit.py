"""SGLang cache-hit replays, run through the release's own `RadixCache` (events on) and its
scheduler's request and allocation code, one cache per endpoint.

For each step of a `cachehit/sglang-<version>-*.json` file, in order:
* `query`: a fresh `Req` of the query's ids (LoRA as the radix `extra_key`, `cache_salt`) on
  a copy of every endpoint's cache (a probe: the live cache's LRU times and nodes stay as
  they are); `Req.init_next_round_input(tree_cache)` (the scheduler's prefix rule:
  `_compute_max_prefix_len`, at most input_len - 1, then `RadixCache.match_prefix`) gives the
  cached tokens, `len(req.prefix_indices)` (compared with `expected_cached_tokens`);
* `run`: the request runs alone on its endpoint as the scheduler runs it: the same lookup
  (compared with the step's `cached_tokens`), `inc_lock_ref` on the matched node (the
  PrefillAdder), `set_extend_range`, the prompt's slots from `alloc_paged_token_slots_extend`
  (which evicts through `evict_from_tree_cache` when the pool is short: the tokens asked
  for plus one page), then `cache_unfinished_req` after the prefill (or `cache_finished_req`
  when the request ends there); each decode step (one token) the capacity check of
  `ScheduleBatch.check_decode_mem` (`new_tokens_required_next_decode`, the allocator's
  `check_decode_capacity`) and `alloc_paged_token_slots_decode` (which evicts when less than
  a page is free), and at the last one `cache_finished_req` with the committed length
  (prompt + outputs - 1);
* `events`: the events the cache's recorder queued in the next phase of that endpoint that
  queued any (startup; a run's prefill step; its decode steps together, as the files hold
  one batch for a run's whole decode) (`RadixCache.take_events`), as a `KVEventBatch` with the step's own
  timestamp, encoded by msgspec as `ZmqEventPublisher` encodes them (the rank set as `publish`
  sets it); compared byte for byte with the payload, with the seq and the phase.

The kit supplies the memory the scheduler would own, as plain Python: a paged token pool of
the file's `kv_capacity_pages` (slot ids page * page_size + offset; frees return whole pages)
and the request-to-token table; and torch.cat / empty / tensor on index lists
(kit/sglang_events.py). EAGLE files (`deployment.radix_is_eagle`) use `is_eagle=True`
(bigram keys) with the same one-token decode steps.
"""

import copy
import os
import types
from array import array

import msgspec

from .sglang_events import Idx, torch_standins


class PagedPool:
    """A paged token pool: `available_size`, extend/decode allocation, page frees."""

    def __init__(self, pages, page_size):
        self.page_size = page_size
        self.free_pages = list(range(1, pages + 1))  # page 0 is the padding page
        self.device = "cpu"

    def available_size(self):
        return len(self.free_pages) * self.page_size

    def _slots(self, start, end, last):
        out = []
        for pos in range(start, end):
            if pos % self.page_size == 0:
                if not self.free_pages:
                    return None
                last = self.free_pages.pop(0) * self.page_size
            else:
                last = last + 1
            out.append(last)
        return out

    def alloc_extend(self, prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens, **kw):
        out = []
        for p, s, l in zip(prefix_lens_cpu, seq_lens_cpu, last_loc):
            need = -(-s // self.page_size) - -(-p // self.page_size)
            if need > len(self.free_pages):
                return None
            out += self._slots(p, s, l)
        return Idx(out)

    def alloc_decode(self, seq_lens, seq_lens_cpu, last_loc, **kw):
        out = []
        for s, l in zip(seq_lens_cpu, last_loc):
            got = self._slots(s - 1, s, l)
            if got is None:
                return None
            out += got
        return Idx(out)

    def free(self, indices):
        pages = sorted({x // self.page_size for x in indices})
        for p in pages:
            if p in self.free_pages or p == 0:
                raise RuntimeError(f"kit: page {p} freed twice")
            self.free_pages.append(p)

    def free_segment(self, indices, start_pos=0):
        self.free(list(indices))

    def free_segments(self, segs):
        for s, _ in segs:
            self.free(list(s))


class ReqToToken:
    """The request-to-token table (`req_to_token[row, a:b]`, `write((row, slice), values)`)."""

    def __init__(self):
        self.rows = {}
        self.req_to_token = self

    def __getitem__(self, ix):
        row, sl = ix
        return Idx(self.rows[row][sl])

    def write(self, ix, values):
        row, sl = ix
        r = self.rows[row]
        start = sl.start or 0
        stop = sl.stop if sl.stop is not None else start + len(values)
        while len(r) < stop:
            r.append(-1)
        r[start:stop] = list(values)

    def alloc(self):
        row = len(self.rows)
        self.rows[row] = []
        return row

    def free(self, req):
        self.rows.pop(req.kv.req_pool_idx, None)


class Replay:
    def __init__(self, eng):
        self.eng = eng
        torch_standins(eng)
        self.cip = eng.module("sglang.srt.mem_cache.cache_init_params")
        self.RadixCache = eng.fn("sglang.srt.mem_cache.radix_cache", "RadixCache", ["params"])
        for q, p in [("RadixCache.match_prefix", ["params"]), ("RadixCache.insert", ["params"]),
                     ("RadixCache.cache_unfinished_req", ["req"]), ("RadixCache.cache_finished_req", ["req", "is_insert"]),
                     ("RadixCache.evict", ["params"]), ("RadixCache.inc_lock_ref", ["node"]),
                     ("RadixCache.dec_lock_ref", ["node"]), ("RadixCache.take_events", [])]:
            eng.fn("sglang.srt.mem_cache.radix_cache", q, p)
        eng.fn("sglang.srt.mem_cache.base_prefix_cache", "BasePrefixCache.evict_for_alloc", ["params"])
        eng.fn("sglang.srt.mem_cache.common", "evict_from_tree_cache", ["tree_cache", "num_tokens"])
        self.Req = eng.fn("sglang.srt.managers.schedule_batch", "Req",
                          ["rid", "origin_input_text", "origin_input_ids", "sampling_params"])
        eng.fn("sglang.srt.managers.schedule_batch", "Req.init_next_round_input", ["tree_cache"])
        eng.fn("sglang.srt.managers.schedule_batch", "Req._compute_max_prefix_len", ["input_len"])
        eng.fn("sglang.srt.managers.schedule_batch", "Req.set_extend_range", ["start", "end"])
        eng.fn("sglang.srt.managers.schedule_batch", "Req.get_fill_ids")
        self.new_tokens = eng.fn("sglang.srt.managers.schedule_batch", "ScheduleBatch.new_tokens_required_next_decode",
                                 ["selected_indices"])
        self.check_capacity = eng.fn("sglang.srt.mem_cache.allocator.base",
                                     "BaseTokenToKVPoolAllocator.check_decode_capacity")
        self.evict_to_free = eng.fn("sglang.srt.mem_cache.allocator.base",
                                    "BaseTokenToKVPoolAllocator.evict_to_free_tokens", ["tree_cache", "num_tokens"])
        self.alloc_extend = eng.fn("sglang.srt.mem_cache.allocation", "alloc_paged_token_slots_extend",
                                   ["tree_cache", "prefix_lens", "prefix_lens_cpu", "seq_lens", "seq_lens_cpu",
                                    "last_loc", "extend_num_tokens"])
        self.alloc_decode = eng.fn("sglang.srt.mem_cache.allocation", "alloc_paged_token_slots_decode",
                                   ["tree_cache", "seq_lens", "seq_lens_cpu", "last_loc"])
        self.SP = eng.fn("sglang.srt.sampling.sampling_params", "SamplingParams")
        self.Spec = eng.fn("sglang.srt.speculative.spec_info", "SpeculativeAlgorithm")
        self.Batch = eng.fn("sglang.srt.disaggregation.kv_events", "KVEventBatch")
        self.enc = msgspec.msgpack.Encoder()
        self.n = 0

    def endpoint(self, doc):
        ps = doc["page_size"]
        pool = PagedPool(doc["kv_capacity_pages"], ps)
        pool.evict_to_free_tokens = types.MethodType(self.evict_to_free, pool)  # the allocator's default hook
        rtt = ReqToToken()
        eagle = bool(doc.get("deployment", {}).get("radix_is_eagle"))
        p = self.cip.CacheInitParams(disable=False, req_to_token_pool=rtt, token_to_kv_pool_allocator=pool,
                                     page_size=ps, is_eagle=eagle, enable_kv_cache_events=True,
                                     eviction_policy=doc.get("eviction_policy", "lru"))
        return types.SimpleNamespace(cache=self.RadixCache(p), pool=pool, rtt=rtt, ps=ps, seq=0, pending=[])

    def request(self, doc, step, max_tokens=16):
        self.n += 1
        extra = None
        if step.get("lora_name"):
            a = next(x for x in doc.get("lora_adapters", []) if x["lora_name"] == step["lora_name"])
            extra = a["radix_extra_key"]
        return self.Req(f"kit-{self.n}", "", array("q", step["token_ids"]), self.SP(max_new_tokens=max_tokens),
                        extra_key=extra, cache_salt=step.get("cache_salt"))

    def query_view(self, ep):
        """A query is a probe: it looks up on a copy of the endpoint's cache, so it neither
        refreshes the LRU times nor splits nodes (as the files were made: a lookup on the live
        cache changes the eviction order, and the eviction file then differs from step 60 on)."""
        return copy.deepcopy(ep.cache)

    def decode_batch(self, ep, req):
        return types.SimpleNamespace(reqs=[req], token_to_kv_pool_allocator=ep.pool, tree_cache=ep.cache,
                                     spec_algorithm=self.Spec.NONE)

    def run_one(self, doc, ep, s):
        """One request through prefill and decode; returns the lookup's cached tokens."""
        c = ep.cache
        req = self.request(doc, s, max_tokens=s["max_tokens"])
        req.init_next_round_input(c)
        hit = len(req.prefix_indices)
        c.inc_lock_ref(req.last_node)
        n = len(s["token_ids"])
        row = ep.rtt.alloc()
        req.kv.req_pool_idx = row
        ep.rtt.write((row, slice(0, hit)), list(req.prefix_indices))
        req.kv.cache_protected_len = hit
        req.set_extend_range(hit, n)
        last = ep.rtt.rows[row][hit - 1] if hit else -1
        out = self.alloc_extend(c, [hit], [hit], [n], [n], [last], n - hit)
        ep.rtt.write((row, slice(hit, n)), list(out))
        req.kv.kv_allocated_len = req.kv.kv_committed_len = n
        outs = s["output_token_ids"]
        req.output_ids.append(outs[0])
        if len(outs) == 1:
            c.cache_finished_req(req, kv_len_to_handle=n)
            ep.rtt.free(req)
            ep.pending.append(("prefill", c.take_events()))
            return hit
        c.cache_unfinished_req(req)
        ep.pending.append(("prefill", c.take_events()))
        # Decode, one token a step as the scheduler runs it; the files hold one batch for the
        # whole decode (the events of every decode step, taken after the request finished).
        evs = []
        for k in range(1, len(outs)):
            b = self.decode_batch(ep, req)
            self.check_capacity(ep.pool, num_tokens=self.new_tokens(b), tree_cache=c)
            pos = n + k - 1
            slot = self.alloc_decode(c, [pos + 1], [pos + 1], [ep.rtt.rows[row][pos - 1]])
            if slot is None:
                raise RuntimeError("kit: decode out of memory")
            ep.rtt.write((row, slice(pos, pos + 1)), list(slot))
            req.kv.kv_allocated_len = req.kv.kv_committed_len = pos + 1
            req.output_ids.append(outs[k])
            if k == len(outs) - 1:
                c.cache_finished_req(req, kv_len_to_handle=req.kv.kv_committed_len)
                ep.rtt.free(req)
            evs += c.take_events()
        ep.pending.append(("decode", evs))
        return hit

    def run(self, doc):
        eps = {e: self.endpoint(doc) for e in doc["endpoints"]}
        for ep in eps.values():
            ep.pending.append(("startup", ep.cache.take_events()))
        ok = bad = 0
        fails = []
        produced = []
        for i, s in enumerate(doc["steps"]):
            out = dict(s)
            produced.append(out)
            if s["kind"] == "query":
                out["expected_cached_tokens"] = {}
                for e, ep in eps.items():
                    r = self.request(doc, s)
                    r.init_next_round_input(self.query_view(ep))
                    got = len(r.prefix_indices)
                    out["expected_cached_tokens"][e] = got
                    if got == s["expected_cached_tokens"][e]:
                        ok += 1
                    else:
                        bad += 1
                        fails.append(f"q{s['id']}/{e}: {got} vs {s['expected_cached_tokens'][e]}")
            elif s["kind"] == "run":
                hit = self.run_one(doc, eps[s["endpoint"]], s)
                out["cached_tokens"] = hit
                if hit == s["cached_tokens"]:
                    ok += 1
                else:
                    bad += 1
                    fails.append(f"run step {i} on {s['endpoint']}: {hit} vs {s['cached_tokens']}")
            elif s["kind"] == "events":
                ep = eps[s["endpoint"]]
                want = bytes.fromhex(s["payload_hex"])
                ts = msgspec.msgpack.decode(want)[0]
                while ep.pending and not ep.pending[0][1]:
                    ep.pending.pop(0)  # steps without events publish nothing
                if not ep.pending:
                    bad += 1
                    fails.append(f"events step {i} on {s['endpoint']}: the kit produced none")
                    out["payload_hex"] = None
                    continue
                phase, evs = ep.pending.pop(0)
                got = self.enc.encode(self.Batch(ts=ts, events=evs, attn_dp_rank=s["dp_rank"]))
                seq = ep.seq
                ep.seq += 1
                out.update(payload_hex=got.hex(), phase=phase, seq=seq, seq_frame_hex=seq.to_bytes(8, "big").hex())
                if got == want and phase == s["phase"] and seq == s["seq"] and out["seq_frame_hex"] == s["seq_frame_hex"]:
                    ok += 1
                else:
                    bad += 1
                    fails.append(f"events step {i} on {s['endpoint']} ({s['phase']}, seq {s['seq']}): "
                                 f"{'payload differs' if got != want else ''} ({phase}, seq {seq})")
                    if os.environ.get("KIT_DEBUG"):
                        fails.append(f"    want {msgspec.msgpack.decode(want)}")
                        fails.append(f"    got  {msgspec.msgpack.decode(got)}")
        for e, ep in eps.items():
            if any(evs for _, evs in ep.pending):
                bad += 1
                fails.append(f"{e}: events left unpublished")
        self.produced = produced
        return ok, ok + bad, fails


def extracted_sources_match(src_root, extracted):
    """The files' `engine_source_extracted` ("path.py:Qual.name" -> "sha256:<hex>" of the
    definition's source segment, as the generator hashed it) checked against the unpacked
    wheel: {"same": n, "total": m, "differ": [...]}. Says whether the replay was made from
    this release's own code."""
    import ast
    import hashlib

    same, differ = 0, []
    trees = {}
    for key, want in extracted.items():
        path, _, qual = key.partition(":")
        if path not in trees:
            p = os.path.join(src_root, path)
            src = open(p).read() if os.path.exists(p) else None
            trees[path] = (src, ast.parse(src) if src else None)
        src, tree = trees[path]
        node = tree
        for part in qual.split("."):
            node = next((n for n in getattr(node, "body", []) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                         and n.name == part), None) if node is not None else None
        got = None if node is None else "sha256:" + hashlib.sha256(ast.get_source_segment(src, node).encode()).hexdigest()
        if got == want:
            same += 1
        else:
            differ.append(key)
    return {"same": same, "total": len(extracted), "differ": differ}
