#!/usr/bin/env bash
# Rebuilds testdata/registry/ (the sample registry) from testdata/models/ and
# testdata/vectors/templates/. Needs bash and python3 (standard library only).
# Idempotent: running it again reproduces the same bytes. See README.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
testdata="$(cd "$here/.." && pwd)"
cd "$here"
rm -rf artifacts manifests probefixtures ./*.yaml
python3 - "$testdata" <<'PY'
import hashlib, json, os, sys

testdata = sys.argv[1]
reg = os.path.join(testdata, "registry")

def sha(b):
    return hashlib.sha256(b).hexdigest()

def write(rel, data):
    path = os.path.join(reg, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)

# (profile id, model dir, served name, model_type, revision (SOURCES.json), aliases, vector file)
MODELS = [
    ("qwen3-06b-default-v1", "Qwen__Qwen3-0.6B", "Qwen/Qwen3-0.6B", "qwen3",
     "c1899de289a04d12100db370d81485cdf75e47ca", None, "qwen3-06b-default-v1.json"),
    ("qwen25-7b-instruct-v1", "Qwen__Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "qwen2",
     "a09a35458c702b33eeacc393d103063234e8bc28", ["qwen2.5-7b-instruct"], "qwen25-7b-instruct-v1.json"),
]
# Fixture cases taken from the template vectors: (case id, fixture name, engines)
CASES = [
    ("completion_0", "basic-ascii", ("vllm", "sglang", "trtllm")),
    ("completion_2", "unicode-mix", ("vllm", "sglang", "trtllm")),
    ("completion_5", "multiline-punct", ("vllm", "sglang", "trtllm")),
    ("single_user", "chat-user-only", ("vllm", "sglang", "trtllm")),
    ("system_user", "chat-system-user", ("vllm", "sglang", "trtllm")),
    ("multi_turn", "chat-multi-turn", ("vllm", "sglang", "trtllm")),
    ("unicode_cjk", "chat-unicode-mix", ("vllm", "sglang", "trtllm")),
    # SGLang sets omit chat cases that end on an assistant turn (docs/contracts/registry.md §5.1).
    ("ends_on_assistant_with_generation_prompt", "chat-assistant-last", ("vllm", "trtllm")),
]
SUBDIR = {"vllm": "", "sglang": "sglang/", "trtllm": "trtllm/"}
VLLM_IMAGE = "sha256:61fc8a896b0a4fbbbdc063bc4b0dbc25ce98e02b5050c24aeb7830ac02039b14"

for pid, mdir, name, mtype, rev, aliases, vec in MODELS:
    tok = open(os.path.join(testdata, "models", mdir, "tokenizer.json"), "rb").read()
    cfg = json.load(open(os.path.join(testdata, "models", mdir, "tokenizer_config.json"), encoding="utf-8"))
    tpl = cfg["chat_template"].encode("utf-8")  # verbatim string, no trailing newline added
    v = json.load(open(os.path.join(testdata, "vectors", "templates", vec), encoding="utf-8"))
    assert sha(tok) == v["artifact_sha256"]["tokenizer.json"], (pid, "tokenizer pin")
    assert sha(tpl) == v["chat_template_sha256"], (pid, "template pin")
    assert b"strftime_now" not in tpl  # no clock policy for these templates
    tsha, psha = sha(tok), sha(tpl)
    write(f"artifacts/sha256/{tsha}", tok)
    write(f"artifacts/sha256/{psha}", tpl)
    lines = [
        f"profileId: {pid}",
        f"baseModel: {name}",
        f"modelType: {mtype}",
        f"tokenizerRevision: {rev}",
        f"tokenizerArtifact: sha256/{tsha}",
        f"tokenizerSha256: {tsha}",
        f"templateArtifact: sha256/{psha}",
        f"templateSha256: {psha}",
        "templateContentFormat: string",
        "renderPolicy:",
        "  addGenerationPrompt: true",
        f"  eosToken: {json.dumps(cfg['eos_token'])}",
        "supportedApis:",
        "  - completions",
        "  - chat",
    ]
    if aliases:
        lines += ["aliasPolicy: list", "allowedAliases:"] + [f"  - {a}" for a in aliases]
    else:
        lines += ["aliasPolicy: base_model_only"]
    write(f"{pid}.yaml", ("\n".join(lines) + "\n").encode())
    manifest = (f'profileId: {pid}\nimageDigest: "{VLLM_IMAGE}"\n'
                f'engineVersion: "0.28.0"\nmodelRevision: "{rev}"\n')
    write(f"manifests/{pid}.yaml", manifest.encode())
    cases = {c["id"]: c for c in v["cases"]}
    for cid, fname, engines in CASES:
        c = cases[cid]
        assert "request_messages" not in c and "tools" not in c, cid
        if c["kind"] == "completion":
            body = {"model": name, "prompt": c["prompt"]}
            api = "completions"
        else:
            assert c["add_generation_prompt"] is True, cid
            body = {"model": name, "messages": c["messages"]}
            api = "chat"
        req = json.dumps(body, ensure_ascii=False).encode("utf-8")
        for eng in engines:
            ids = c["engine_token_ids"][eng]
            assert ids, (cid, eng)
            exp = {"requestSha256": sha(req), "expectedTokenIds": ids, "api": api}
            d = f"probefixtures/{pid}/{SUBDIR[eng]}"
            write(f"{d}{fname}.request.json", req)
            write(f"{d}{fname}.expect.json", json.dumps(exp, indent=1).encode())
PY
find . -type d -exec chmod 0755 {} +
find . -type f ! -name make.sh -exec chmod 0644 {} +
echo "testdata/registry rebuilt"
