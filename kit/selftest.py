"""`python3 -m kit.selftest`: the kit against the project's own vectors.

* vLLM 0.31.0 (`vllm/`), 0.33.0 (`versions/vllm-0.33.0/`), 0.34.0 (`versions/vllm-0.34.0/`):
  every block-hash case of the four files, recomputed by that release's own code from the
  case's inputs, equals the file's expected value, field for field (hashes, ints, parents,
  extra keys, serialized bytes, NONE_HASH); every case of `kv_events.json` (frames, payload,
  schema-less decode) from its BlockPool and ZmqEventPublisher; every step of its cache-hit
  replays (`cachehit/vllm-<version>-*.json`: each endpoint's cached tokens at each query, each
  run's count, each event batch's bytes) from its KVCacheManager;
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
        r = run(["vllm", v])
        for f, c in r["files"].items():
            src = "testdata/vectors" if f.startswith("cachehit/") else r["compared_with"]
            line = f"vllm {v} {src}/{f}: {c['reproduced']}/{c['total']}"
            print(line)
            totals.append(line)
            if c["reproduced"] != c["total"]:
                ok = False
                for d in c["differ"][:5]:
                    print("   differs:", d)
        if not r["files"]:
            ok = False
    # SGLang 0.5.19 (`sglang/`): pages, partial tails, insert events, errors.
    r = run(["sglang", "0.5.19"])
    for f, c in r["files"].items():
        line = f"sglang 0.5.19 {r['compared_with']}/{f}: {c['reproduced']}/{c['total']}"
        print(line)
        if c["reproduced"] != c["total"]:
            ok = False
            for d in c["differ"][:5]:
                print("   differs:", d)
    if not r["files"]:
        ok = False
    # 0.34.0 qualified as a new release: 0.33.0's inputs, compared with 0.33.0's files.
    r = run(["vllm", "0.34.0", "--inputs", "testdata/vectors/versions/vllm-0.33.0",
             "--against", "testdata/vectors/versions/vllm-0.33.0",
             "--out", os.path.join(CACHE, "out", "vllm-0.34.0-as-new")])
    seen = [c for c in r["rule_changes"] if not c.startswith("function ")]
    print("vllm 0.34.0 vs 0.33.0, rule changes:", json.dumps(seen, indent=1))
    want = {
        "default_block_size: 16 -> 64",
        "request_token_ids: python-int -> int32",
        "frontend_block_hashes: none -> ignored-without-config",
        "prompt_logprobs: skip -> cap-at-start",
        "empty_tools: refused (VLLMValidationError) -> omitted",
    }
    got = set(seen)
    if got != want:
        ok = False
        print("expected exactly:", sorted(want), "\nmissing:", sorted(want - got), "\nunexpected:", sorted(got - want))
    for f, c in r["files"].items():
        if c["reproduced"] != c["total"]:
            ok = False
            print(f"  0.34.0 on 0.33.0's inputs differs in {f}: {c['differ'][:3]}")
    # SGLang 0.5.23 against 0.5.22: the wide-page rule appears.
    r = run(["sglang", "0.5.22", "--no-replays"])
    r = run(["sglang", "0.5.23"])
    for f, c in r["files"].items():
        print(f"sglang 0.5.23 {r['compared_with']}/{f}: {c['reproduced']}/{c['total']}")
        if c["reproduced"] != c["total"]:
            ok = False
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
