"""`python3 -m kit.selftest`: the kit against the project's own vectors.

* vLLM 0.31.0 (`vllm/`), 0.33.0 (`versions/vllm-0.33.0/`), 0.34.0 (`versions/vllm-0.34.0/`):
  every block-hash case of the four files, recomputed by that release's own code from the
  case's inputs, equals the file's expected value, field for field (hashes, ints, parents,
  extra keys, serialized bytes, NONE_HASH); every case of `kv_events.json` (frames, payload,
  schema-less decode) from its BlockPool and ZmqEventPublisher; every step of its cache-hit
  replays (`cachehit/vllm-<version>-*.json`: each endpoint's cached tokens at each query, each
  run's count, each event batch's bytes, seq and phase) from its KVCacheManager, the
  speculative-decoding deployments (`specdec-l1`, `specdec-l3` of 0.33.0 and 0.34.0) included
  and none skipped, each deployment as the release derives it the same as the header's; a
  mutated copy of `vllm-0.33.0-specdec-l3.json` (one query's cached tokens, the header's
  `num_lookahead_tokens`) is caught, those two named, and a copy with a KV connector is skipped;
  for 0.31.0 and 0.33.0 every template case of the five profiles with a tokenizer
  (`templates/`: `engine_token_ids.vllm` or `engine_errors.vllm`) from its tokenizer loading,
  renderer and OnlineRenderer (kit/vllm_chat.py), and a mutated copy of the Qwen2.5 file
  caught, each changed value named;
* SGLang 0.5.19 (`sglang/`, `cachehit/sglang-0.5.19-*`): every block-hash case; every KV-event
  case (frames, payload, decodes) and header example from its RadixCache and publisher; every
  step of its four cache-hit replays (EAGLE included) from its RadixCache and scheduler code,
  and each replay file's `engine_source_extracted` the same in the wheel; mutated copies of
  the event and eviction files are caught, each changed value named;
* run on 0.34.0 with 0.33.0's inputs, the rule changes it reports are exactly the ones code
  can see: the default block size 16 -> 64, int32 request token ids, frontend-supplied block
  hashes, the prompt-logprobs hit cap; the event module unchanged.

Exit 0 when all hold; prints counts per file. Each release runs in its own process (a
release's modules are imported once per interpreter).
"""

import json
import os
import subprocess
import sys
import time

from .engine import ROOT, CACHE

PY = sys.executable
# The vLLM speculative-decoding replays (a `deployment` header) each release must reproduce.
VLLM_SPECDEC = {"0.33.0": ["specdec-l1", "specdec-l3"], "0.34.0": ["specdec-l1", "specdec-l3"]}
SGLANG_REPLAYS = ["eagle", "eviction", "lora-salt", "shared-prefix"]
# config.json's model_type of R1-Distill-Qwen (the project's model folder has tokenizer files only).
R1_TYPE = "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B=qwen2"
SGLANG_CHAT_PROFILES = ["gemma2-9b-it-v1", "llama31-8b-instruct-v1", "qwen25-7b-instruct-v1", "qwen3-06b-default-v1",
                        "r1-distill-qwen-7b-v1"]
# vLLM's chat step: the model_type of each model's config.json on the hub (the stand-in model
# folder's config.json; vLLM's ModelConfig loads it through its own get_config).
VLLM_MODEL_TYPES = ["google/gemma-2-9b-it=gemma2", "meta-llama/Llama-3.1-8B-Instruct=llama",
                    "Qwen/Qwen2.5-7B-Instruct=qwen2", "Qwen/Qwen3-0.6B=qwen3", R1_TYPE]
VLLM_MT_ARGS = [x for m in VLLM_MODEL_TYPES for x in ("--model-type", m)]
VLLM_CHAT = ["0.31.0", "0.33.0"]  # chat step on templates/ (0.34.0: run by hand, README)


def mutated_vllm_chat():
    """vLLM's chat comparison can fail: a copy of the Qwen2.5 template file with a chat case's
    vLLM token id and an engine error message changed must be reported as exactly those."""
    import shutil

    base = os.path.join(CACHE, "selftest-mutated-vllm")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(os.path.join(base, "vllm", "templates"))
    v = os.path.join(ROOT, "testdata", "vectors")
    t = json.load(open(os.path.join(v, "templates", "qwen25-7b-instruct-v1.json")))
    tc = {c["id"]: c for c in t["cases"]}
    tc["single_user"]["engine_token_ids"]["vllm"][3] += 1
    e = next(c for c in t["cases"] if (c.get("engine_errors") or {}).get("vllm"))
    e["engine_errors"]["vllm"] += "!"
    json.dump(t, open(os.path.join(base, "vllm", "templates", "qwen25-7b-instruct-v1.json"), "w"))
    r = run(["vllm", "0.31.0", "--inputs", os.path.join(base, "vllm"), "--against", os.path.join(base, "vllm"),
             "--no-replays", *VLLM_MT_ARGS, "--out", os.path.join(CACHE, "out", "selftest-mutated-vllm")])
    tr = next((x for f, x in r["files"].items() if f.endswith("/qwen25-7b-instruct-v1.json")),
              {"reproduced": -1, "total": -1, "differ": []})
    tnamed = sorted(d[0] for d in tr["differ"])
    good = tr["total"] == 39 and tr["reproduced"] == 37 and tnamed == sorted(["single_user", e["id"]])
    print(f"vllm mutated copy: qwen25 chat {tr['reproduced']}/{tr['total']} (differ: {', '.join(tnamed)}) -> "
          f"{'caught' if good else 'NOT CAUGHT'}")
    return good


def mutated_sglang():
    """The SGLang comparisons can fail: copies of the 0.5.19 event, eviction-replay and Qwen2.5
    template files with expected values changed (an event's medium, a payload byte, an
    endpoint-offset example, a query's cached tokens, a replay batch's payload, a chat case's
    token id, an engine error's message) must be reported as exactly those differences."""
    import shutil

    base = os.path.join(CACHE, "selftest-mutated")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(os.path.join(base, "sglang"))
    os.makedirs(os.path.join(base, "cachehit"))
    v = os.path.join(ROOT, "testdata", "vectors")
    shutil.copy(os.path.join(v, "sglang", "block_hashes.json"), os.path.join(base, "sglang"))
    ev = json.load(open(os.path.join(v, "sglang", "kv_events.json")))
    cases = {c["name"]: c for c in ev["cases"]}
    cases["lifecycle_p16"]["expected"]["batches"][1]["decoded"]["events"][0]["medium"] = "CPU_PINNED"
    b = cases["dp_rank_2"]["expected"]["batches"][1]
    b["payload_hex"] = b["payload_hex"][:-2] + "03"
    ev["endpoint_offset_examples"][1]["result"] = "tcp://*:5559"
    json.dump(ev, open(os.path.join(base, "sglang", "kv_events.json"), "w"))
    ch = json.load(open(os.path.join(v, "cachehit", "sglang-0.5.19-eviction.json")))
    q = next(s for s in ch["steps"] if s["kind"] == "query" and s["expected_cached_tokens"]["sglang-0"] > 0)
    q["expected_cached_tokens"]["sglang-0"] += 16
    e = [s for s in ch["steps"] if s["kind"] == "events"][10]
    e["payload_hex"] = e["payload_hex"][:-2] + "01"
    json.dump(ch, open(os.path.join(base, "cachehit", "sglang-0.5.19-eviction.json"), "w"))
    os.makedirs(os.path.join(base, "sglang", "templates"))
    t = json.load(open(os.path.join(v, "templates", "qwen25-7b-instruct-v1.json")))
    tc = {c["id"]: c for c in t["cases"]}
    tc["single_user"]["engine_token_ids"]["sglang"][3] += 1
    e = next(c for c in t["cases"] if (c.get("engine_errors") or {}).get("sglang"))
    e["engine_errors"]["sglang"] += "!"
    json.dump(t, open(os.path.join(base, "sglang", "templates", "qwen25-7b-instruct-v1.json"), "w"))
    r = run(["sglang", "0.5.19", "--inputs", os.path.join(base, "sglang"), "--against", os.path.join(base, "sglang"),
             "--cachehit", os.path.join(base, "cachehit"), "--out", os.path.join(CACHE, "out", "selftest-mutated")])
    k = r["files"]["kv_events.json"]
    named = sorted(d[0] for d in k["differ"])
    c = r["files"].get("cachehit/sglang-0.5.19-eviction.json", {"reproduced": -1, "total": -1})
    tr = next((x for f, x in r["files"].items() if f.endswith("/qwen25-7b-instruct-v1.json")), {"reproduced": -1, "total": -1, "differ": []})
    tnamed = sorted(d[0] for d in tr["differ"])
    good = (k["reproduced"] == k["total"] - 3 and named == ["dp_rank_2", "endpoint_offset_examples[1]", "lifecycle_p16"]
            and c["reproduced"] == c["total"] - 2 and c["total"] == 342
            and tr["total"] == 39 and tr["reproduced"] == 37 and tnamed == sorted(["single_user", e["id"]]))
    print(f"sglang mutated copies: kv_events {k['reproduced']}/{k['total']} (differ: {', '.join(named)}), "
          f"eviction replay {c['reproduced']}/{c['total']}, qwen25 chat {tr['reproduced']}/{tr['total']} "
          f"(differ: {', '.join(tnamed)}) -> {'caught' if good else 'NOT CAUGHT'}")
    return good


def mutated_vllm_specdec():
    """The vLLM deployment replay can fail: a copy of `vllm-0.33.0-specdec-l3.json` with one
    query's expected cached tokens changed must be reported as exactly that query differing."""
    import shutil

    base = os.path.join(CACHE, "selftest-mutated-vllm")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(os.path.join(base, "cachehit"))
    name = "vllm-0.33.0-specdec-l3.json"
    ch = json.load(open(os.path.join(ROOT, "testdata", "vectors", "cachehit", name)))
    q = [s for s in ch["steps"] if s["kind"] == "query" and s["expected_cached_tokens"]["vllm-1"] > 0][5]
    q["expected_cached_tokens"]["vllm-1"] += 16
    ch["deployment"]["num_lookahead_tokens"] += 1  # not what the release derives from the speculative config
    json.dump(ch, open(os.path.join(base, "cachehit", name), "w"))
    # A deployment the kit does not replay (a KV connector): skipped, with the reason.
    ch["deployment"]["kv_transfer_config"] = {"kv_connector": "LMCacheConnectorV1"}
    json.dump(ch, open(os.path.join(base, "cachehit", "vllm-0.33.0-specdec-kvconnector.json"), "w"))
    r = run(["vllm", "0.33.0", "--cachehit", os.path.join(base, "cachehit"),
             "--out", os.path.join(CACHE, "out", "selftest-mutated-vllm")])
    sk = r["files"].get("cachehit/vllm-0.33.0-specdec-kvconnector.json", {})
    skipped = "KV connector" in (sk.get("skipped") or "") and sk.get("total") == 0
    print(f"vllm deployment with a KV connector: {'skipped (' + sk['skipped'] + ')' if skipped else 'NOT SKIPPED: ' + str(sk)}")
    c = r["files"].get("cachehit/" + name, {"reproduced": -1, "total": -1, "differ": []})
    named = [d[0].split(":")[0] for d in c["differ"]]
    want = ["deployment.num_lookahead_tokens", f"q{q['id']}/vllm-1"]
    dd = c.get("deployment_derived", {})
    good = (c["total"] == 412 and c["reproduced"] == 410 and named == want and not c.get("skipped")
            and dd.get("same") == dd.get("total", 0) - 1 and skipped)
    print(f"vllm mutated copy: {name} {c['reproduced']}/{c['total']} (differ: {', '.join(named)}; "
          f"mutated: {', '.join(want)}) -> {'caught' if good else 'NOT CAUGHT'}")
    return good


def run(args):
    p = subprocess.run([PY, "-m", "kit.qualify", *args, "--json"], cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        raise SystemExit(f"kit.qualify {' '.join(args)} failed ({p.returncode})")
    return json.loads(p.stdout)


def main():
    t0 = time.time()
    ok = True
    totals = []
    for v in ["0.31.0", "0.33.0", "0.34.0"]:
        r = run(["vllm", v, *(VLLM_MT_ARGS if v in VLLM_CHAT else ["--no-chat"])])
        if v in VLLM_CHAT:  # chat rendering / tokenizer loading: every profile with a tokenizer
            want_t = {f"templates/{p}.json" for p in SGLANG_CHAT_PROFILES}
            got_t = {f for f, c in r["files"].items() if f.startswith("templates/") and not c.get("skipped")}
            if got_t != want_t or any(r["files"][f]["total"] == 0 for f in got_t):
                ok = False
                print(f"vllm {v}: chat files", sorted(got_t), "expected", sorted(want_t))
        for f, c in r["files"].items():
            if c.get("skipped") and f == "templates/exaone35-78b-instruct-v1.json":
                print(f"vllm {v} testdata/vectors/{f}: skipped ({c['skipped']})")
                continue
            src = "testdata/vectors" if f.startswith(("cachehit/", "templates/")) else r["compared_with"]
            line = f"vllm {v} {src}/{f}: {c['reproduced']}/{c['total']}"
            print(line)
            totals.append(line)
            if c["reproduced"] != c["total"]:
                ok = False
                for d in c["differ"][:5]:
                    print("   differs:", d)
        if not r["files"]:
            ok = False
        for x in VLLM_SPECDEC.get(v, []):
            c = r["files"].get(f"cachehit/vllm-{v}-{x}.json")
            if c is None or c.get("skipped") or c["total"] == 0:
                ok = False
                print(f"vllm {v}: cachehit/vllm-{v}-{x}.json not replayed: {c and c.get('skipped')}")
            else:
                dd = c.get("deployment_derived", {})
                print(f"   deployment derived by {v} (speculative config -> {dd.get('values')}): "
                      f"{dd.get('same')}/{dd.get('total')} as the header")
                if not dd or dd["same"] != dd["total"]:
                    ok = False
        for f, c in r["files"].items():
            if f.startswith("cachehit/") and c.get("skipped"):
                ok = False
                print(f"vllm {v} {f}: skipped ({c['skipped']})")
    ok = mutated_vllm_specdec() and ok
    # SGLang 0.5.19 (`sglang/`): pages, partial tails, insert events, errors; the KV events
    # (cases and header examples); every cache-hit replay (the EAGLE deployment's included).
    r = run(["sglang", "0.5.19", "--model-type", R1_TYPE])
    want_files = ({"block_hashes.json", "kv_events.json"} | {f"cachehit/sglang-0.5.19-{x}.json" for x in SGLANG_REPLAYS}
                  | {f"templates/{p}.json" for p in SGLANG_CHAT_PROFILES} | {"templates/exaone35-78b-instruct-v1.json"})
    if set(r["files"]) != want_files:
        ok = False
        print("sglang 0.5.19: files", sorted(r["files"]), "expected", sorted(want_files))
    for f, c in r["files"].items():
        src = "testdata/vectors" if f.startswith(("cachehit/", "templates/")) else r["compared_with"]
        if c.get("skipped") and f == "templates/exaone35-78b-instruct-v1.json":
            print(f"sglang 0.5.19 {src}/{f}: skipped ({c['skipped']})")
            continue
        line = f"sglang 0.5.19 {src}/{f}: {c['reproduced']}/{c['total']}"
        ex = c.get("engine_source_extracted")
        if ex:
            line += f" (engine_source_extracted {ex['same']}/{ex['total']} the same in the wheel)"
            if ex["same"] != ex["total"]:
                ok = False
        print(line)
        if c["reproduced"] != c["total"] or c["total"] == 0 or c.get("skipped"):
            ok = False
            for d in c["differ"][:5]:
                print("   differs:", d)
    ok = mutated_sglang() and ok
    ok = mutated_vllm_chat() and ok
    # 0.34.0 qualified as a new release: 0.33.0's inputs, compared with 0.33.0's files.
    r = run(["vllm", "0.34.0", "--inputs", "testdata/vectors/versions/vllm-0.33.0",
             "--against", "testdata/vectors/versions/vllm-0.33.0",
             "--no-chat", "--out", os.path.join(CACHE, "out", "vllm-0.34.0-as-new")])
    seen = [c for c in r["rule_changes"] if not c.startswith("function ")]
    print("vllm 0.34.0 vs 0.33.0, rule changes:", json.dumps(seen, indent=1))
    want = {
        "default_block_size: 16 -> 64",
        "request_token_ids: python-int -> int32",
        "frontend_block_hashes: none -> ignored-without-config",
        "prompt_logprobs: skip -> cap-at-start",
        "empty_tools: refused (VLLMValidationError) -> omitted",
        # The chat libraries the wheels declare (0.34.0: transformers >=5.16.1,<5.23.0,
        # tokenizers >=0.23.3).
        "requires_tokenizers: >=0.23.2 -> >=0.23.3",
        "requires_transformers: <5.21.0,>=5.16.1 -> <5.23.0,>=5.16.1",
    }
    got = set(seen)
    if got != want:
        ok = False
        print("expected exactly:", sorted(want), "\nmissing:", sorted(want - got), "\nunexpected:", sorted(got - want))
    for f, c in r["files"].items():
        if c["reproduced"] != c["total"]:
            ok = False
            print(f"  0.34.0 on 0.33.0's inputs differs in {f}: {c['differ'][:3]}")
        elif f.startswith("cachehit/"):
            print(f"  0.34.0 on 0.33.0's inputs: {f}: {c['reproduced']}/{c['total']}")
    for x in VLLM_SPECDEC["0.33.0"]:
        c = r["files"].get(f"cachehit/vllm-0.33.0-{x}.json")
        if c is None or c.get("skipped") or c["total"] == 0:
            ok = False
            print(f"  0.34.0 on 0.33.0's inputs: cachehit/vllm-0.33.0-{x}.json not replayed")
    # SGLang 0.5.20, 0.5.22, 0.5.23 (`versions/`): block hashes and KV events (map encoding,
    # replay replies with the topic frame); 0.5.22/0.5.23's LoRA/salt namespace cases against
    # the kit's committed run (`testdata/vectors/kit/`); 0.5.23 against 0.5.22: the wide-page
    # rule appears.
    for v in ["0.5.20", "0.5.22", "0.5.23"]:
        # 0.5.23 has its own template cases (`versions/sglang-0.5.23/templates/`): chat step on.
        r = run(["sglang", v, *(["--model-type", R1_TYPE] if v == "0.5.23" else ["--no-chat"])])
        want = {"block_hashes.json", "kv_events.json"} | ({f"sglang-{v}-namespaces.json"} if v != "0.5.20" else set())
        if v == "0.5.23":
            want |= {f"versions/sglang-0.5.23/templates/{p}.json" for p in SGLANG_CHAT_PROFILES}
        if set(r["files"]) != want:
            ok = False
            print(f"sglang {v}: files", sorted(r["files"]))
        for f, c in r["files"].items():
            src = ("testdata/vectors/kit" if f.endswith("-namespaces.json") else
                   "testdata/vectors" if f.startswith("versions/") else r["compared_with"])
            print(f"sglang {v} {src}/{f}: {c['reproduced']}/{c['total']}")
            if c["reproduced"] != c["total"] or c["total"] == 0:
                ok = False
                for d in c["differ"][:5]:
                    print("   differs:", d)
    if "wide_pages: False -> True" not in r["rule_changes"]:
        ok = False
        print("sglang 0.5.23: the wide-page rule change was not reported:", r["rule_changes"])
    else:
        print("sglang 0.5.23 vs 0.5.22: wide_pages: False -> True")
    # An engine function the kit relies on that is missing: loud, named, nothing written.
    out = os.path.join(CACHE, "out", "selftest-refusal")
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([PY, "-m", "kit.qualify", "vllm", "0.31.0", "--out", out,
                        "--require", "vllm.v1.core.kv_cache_utils:no_such_function"],
                       cwd=ROOT, capture_output=True, text=True)
    loud = p.returncode == 3 and "ENGINE_CHANGED" in p.stderr and "kv_cache_utils:no_such_function" in p.stderr
    if not loud or os.path.exists(out):
        ok = False
        print("the refusal of a changed engine function did not hold:", p.returncode, p.stderr[-400:])
    else:
        print("changed engine function: refused with its name (exit 3), nothing written")
    # A function whose parameters changed: the same refusal (checked on the kit's loader).
    q = subprocess.run([PY, "-c", (
        "from kit.engine import Engine, EngineChanged\n"
        "e = Engine('vllm', '0.31.0')\n"
        "try:\n"
        "    e.fn('vllm.v1.core.kv_cache_utils', 'hash_block_tokens', ['not_its_parameter'])\n"
        "except EngineChanged as x:\n"
        "    print('refused:', x)\n")], cwd=ROOT, capture_output=True, text=True)
    if "refused: vllm.v1.core.kv_cache_utils:hash_block_tokens: parameters" not in q.stdout:
        ok = False
        print("a changed signature was not refused:", q.stdout, q.stderr[-400:])
    else:
        print(q.stdout.strip())
    print(f"selftest {'passed' if ok else 'FAILED'} in {time.time() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
