"""Chat rendering and tokenizer loading by the release's own code, with transformers and
tokenizers installed for real at the versions the release's wheel pins (its METADATA
`Requires-Dist`), on the project's template cases (`templates/<profile>.json`: each case's
`engine_token_ids[<engine>]`, or `engine_errors[<engine>]`).

`python3 -m kit.chat sglang 0.5.19 [--templates DIR] [--json]` (kit.qualify runs it in its own
process: the hashing runs keep transformers stubbed). vLLM (`python3 -m kit.chat vllm 0.31.0
--model-type MODEL=TYPE ...`): kit/vllm_chat.py; vLLM pins ranges, so `stack` picks the
versions (the template files' engine_truth for this release, else the ranges' lower bounds).

SGLang (the path `engine_truth.engines.sglang` of the files names):
* tokenizer: `sglang.srt.utils.hf_transformers.tokenizer.get_tokenizer(model_dir)` (its
  post-load fixes, e.g. add_bos_token restored from tokenizer_config.json);
* templates: `TemplateManager.initialize_templates(tokenizer_manager, model_path=<HF id>)`
  (named-template guess from the model id, else the tokenizer's Jinja template and its
  detected content format);
* chat: the server's `OpenAIServingChat` built by its own `__init__` over a tokenizer
  manager stand-in (tokenizer, server args defaults, model id), each case's request validated
  by its `ChatCompletionRequest`, `_process_messages(request, is_multimodal=False)` ->
  `prompt_ids` (or the exception it raises, as class and message);
* completion: `OpenAIServingCompletion._convert_to_internal_request` builds the request the
  tokenizer manager tokenizes; `TokenizerManager._tokenize_texts` is the engine's text
  tokenization (special tokens on).

Models: `/work/shared/models/<org>__<name>/` (tokenizer files only); profiles whose
`tokenizer_available` is false are skipped (render-only).
"""

import argparse
import json
import os
import subprocess
import sys
import time
import types

from .engine import CACHE, ROOT, EngineChanged

MODELS = ["/work/shared/models", os.path.join(ROOT, "testdata", "models")]
# Imported for real in the chat step (mistral_common is not installed: SGLang imports it
# optionally, and the Mistral tokenizer path is not among these profiles).
REAL = ("transformers", "tokenizers", "huggingface_hub", "safetensors", "mistral_common")


def pins(src_dir, engine, version):
    """{package: exact version} the wheel's METADATA pins (== only) for the chat libraries."""
    import glob

    out = {}
    for meta in glob.glob(os.path.join(src_dir, f"{engine}-{version}.dist-info", "METADATA")):
        for line in open(meta):
            if line.startswith("Requires-Dist:") and "extra ==" not in line:
                spec = line.split(":", 1)[1].strip()
                for p in ("transformers", "tokenizers"):
                    if spec.startswith(p) and "==" in spec:
                        out[p] = spec.split("==", 1)[1].split(";")[0].split(",")[0].strip()
    return out


def ranges(src_dir, engine, version):
    """{package: specifier} of the wheel's METADATA for transformers and tokenizers."""
    import glob
    import re

    out = {}
    for meta in glob.glob(os.path.join(src_dir, f"{engine}-{version}.dist-info", "METADATA")):
        for line in open(meta):
            if line.startswith("Requires-Dist:") and "extra ==" not in line:
                spec = line.split(":", 1)[1].split(";")[0].strip()
                m = re.match(r"(transformers|tokenizers)\s*(\S.*)?$", spec)
                if m:
                    out[m.group(1)] = (m.group(2) or "").replace(" ", "")
    return out


def stack(src_dir, engine, version, templates_dir):
    """The transformers / tokenizers versions the chat step installs, and why:
    1. the wheel's exact pins (`==`, SGLang);
    2. else the versions the template files' `engine_truth.engines.<engine>` names for this
       very release (vLLM 0.31.0 on `templates/`: 5.12.1 / 0.22.2);
    3. else the lowest versions the wheel's ranges allow (their `>=` bounds: vLLM 0.33.0
       5.16.1 / 0.23.2, 0.34.0 5.16.1 / 0.23.3; `versions/README.md` records the chat path
       identical with the oldest and the newest stack in range)."""
    import glob

    p = pins(src_dir, engine, version)
    if set(p) == {"transformers", "tokenizers"}:
        return p, "the wheel's METADATA pins (==)"
    for f in sorted(glob.glob(os.path.join(templates_dir, "*.json"))):
        et = ((json.load(open(f)).get("engine_truth") or {}).get("engines") or {}).get(engine) or {}
        if et.get("version") == version and et.get("transformers") and et.get("tokenizers"):
            return ({"transformers": et["transformers"], "tokenizers": et["tokenizers"]},
                    f"the template files' engine_truth.engines.{engine} (version {version})")
    r = ranges(src_dir, engine, version)
    low = {}
    for k, spec in r.items():
        for part in spec.split(","):
            if part.startswith(">="):
                low[k] = part[2:]
    if set(low) == {"transformers", "tokenizers"}:
        return low, f"the lowest versions the wheel's METADATA allows ({r})"
    return None, f"the wheel names {r or 'no'} transformers/tokenizers versions the kit can pick from"


def deps_dir(p):
    """A folder with transformers, tokenizers (and jinja2) at the pinned versions (pip, once)."""
    d = os.path.join(CACHE, "chat", f"tf-{p['transformers']}-tok-{p['tokenizers']}")
    if not os.path.exists(os.path.join(d, ".kit-installed")):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", d,
                        f"transformers=={p['transformers']}", f"tokenizers=={p['tokenizers']}", "jinja2", "jsonschema"], check=True)
        open(os.path.join(d, ".kit-installed"), "w").close()
    return d


def model_dir(model, model_type=None):
    """The project's tokenizer files for `model`; with `model_type`, a copy under .kit-cache
    that adds the one config.json field transformers reads to pick the tokenizer class (the
    project's model folders hold tokenizer files only)."""
    for base in MODELS:
        d = os.path.join(base, model.replace("/", "__"))
        if os.path.exists(os.path.join(d, "tokenizer_config.json")):
            break
    else:
        return None
    if not model_type:
        return d
    o = os.path.join(CACHE, "chat", "models", f"{model.replace('/', '__')}-{model_type}")
    os.makedirs(o, exist_ok=True)
    for f in os.listdir(d):
        if f != "config.json" and not os.path.exists(os.path.join(o, f)):
            os.symlink(os.path.join(d, f), os.path.join(o, f))
    json.dump({"model_type": model_type}, open(os.path.join(o, "config.json"), "w"))
    return o


def err(e):
    return f"{type(e).__name__}: {e}"


class SglangChat:
    def __init__(self, eng):
        self.eng = eng
        import importlib.util

        self.has_context = (importlib.util.find_spec("sglang.srt.runtime_context") is not None
                            and hasattr(eng.module("sglang.srt.runtime_context"), "get_serving"))
        self.get_tokenizer = eng.fn("sglang.srt.utils.hf_transformers.tokenizer", "get_tokenizer", ["tokenizer_name"])
        self.TM = eng.fn("sglang.srt.parser.template_manager", "TemplateManager")
        eng.fn("sglang.srt.parser.template_manager", "TemplateManager.initialize_templates",
               ["tokenizer_manager", "model_path"])
        self.Chat = eng.fn("sglang.srt.entrypoints.openai.serving_chat", "OpenAIServingChat",
                           ["tokenizer_manager", "template_manager"])
        eng.fn("sglang.srt.entrypoints.openai.serving_chat", "OpenAIServingChat._process_messages",
               ["request", "is_multimodal"])
        eng.fn("sglang.srt.entrypoints.openai.serving_chat", "OpenAIServingChat._apply_jinja_template")
        self.Req = eng.fn("sglang.srt.entrypoints.openai.protocol", "ChatCompletionRequest")
        self.CReq = eng.fn("sglang.srt.entrypoints.openai.protocol", "CompletionRequest")
        self.Completion = eng.fn("sglang.srt.entrypoints.openai.serving_completions", "OpenAIServingCompletion",
                                 ["tokenizer_manager", "template_manager"])
        eng.fn("sglang.srt.entrypoints.openai.serving_completions", "OpenAIServingCompletion._validate_request",
               ["request"])
        self.TokMgr = eng.fn("sglang.srt.managers.tokenizer_manager", "TokenizerManager")
        eng.fn("sglang.srt.managers.tokenizer_manager", "TokenizerManager._tokenize_texts", ["texts"])

    def manager(self, tok, model):
        sa = types.SimpleNamespace(default_chat_template_kwargs=None, revision=None, tool_call_parser=None,
                                   reasoning_parser=None, enable_cache_report=False)
        mc = types.SimpleNamespace(get_default_sampling_params=lambda: {}, hf_config=types.SimpleNamespace(
            model_type=None, architectures=[], to_dict=lambda: {}), is_multimodal=False, context_len=1 << 20)
        return types.SimpleNamespace(tokenizer=tok, processor=None, server_args=sa, model_config=mc, model_path=model,
                                     served_model_name=model, config_value=lambda k: getattr(sa, k, None))

    def profile(self, doc, model_type=None):
        d = model_dir(doc["model"], model_type)
        if d is None:
            return None
        tok = self.get_tokenizer(d)
        rc = self.eng.module("sglang.srt.runtime_context") if self.has_context else None
        if rc is not None:
            # 0.5.20+: the serving objects read the server configuration from the runtime
            # context; the server's own defaults, published as the launcher publishes them.
            SA = self.eng.fn("sglang.srt.server_args", "ServerArgs")  # (*args, **kwargs): model_path is a field
            self.eng.fn("sglang.srt.runtime_context", "RuntimeContext.set_server_args", ["server_args"])
            rc._CONTEXT.set_server_args(SA(model_path=d))
        tm = self.manager(tok, doc["model"])
        tmpl = self.TM()
        tmpl.initialize_templates(tm, model_path=doc["model"])
        try:
            chat = self.Chat(tm, tmpl)
            comp = self.Completion(tm, tmpl)
        except Exception as e:  # e.g. 0.5.20+: the server config comes from the runtime context
            raise EngineChanged(
                "sglang.srt.entrypoints.openai.serving_chat:OpenAIServingChat.__init__: "
                f"{err(e)} (the kit builds the serving objects over a tokenizer-manager stand-in "
                "and the server's default ServerArgs; use --no-chat to qualify the rest)") from e
        # The tokenizer manager's own text tokenization, on a manager holding this tokenizer.
        mgr = object.__new__(self.TokMgr)
        mgr.tokenizer = tok
        mgr.model_config = types.SimpleNamespace(is_embedding_gemma=False)
        mgr.async_dynamic_batch_tokenizer = None
        return tok, (chat, comp, mgr)

    def completion_case(self, paths, doc, c):
        import asyncio

        chat, comp, mgr = paths
        try:
            req = self.CReq(model=doc["model"], prompt=c["prompt"])
            msg = comp._validate_request(req)
            if msg:
                return {"error": f"ValueError: {msg}"}
            ids = asyncio.run(mgr._tokenize_texts(req.prompt))[0]
            return {"token_ids": list(ids)}
        except Exception as e:
            return {"error": err(e)}

    def chat_case(self, paths, doc, c):
        chat = paths[0]
        body = {"model": doc["model"], "messages": c.get("request_messages") or c["messages"]}
        if c.get("tools"):
            body["tools"] = c["tools"]
        if c.get("add_generation_prompt") is False:
            body["add_generation_prompt"] = False
        if c.get("continue_final_message"):
            body["continue_final_message"] = True
        if c.get("template_kwargs"):
            body["chat_template_kwargs"] = c["template_kwargs"]
        body = json.loads(json.dumps(body))
        for m in body["messages"]:  # arguments given as an object are sent JSON-encoded
            for tc in m.get("tool_calls") or []:
                a = tc.get("function", {}).get("arguments")
                if a is not None and not isinstance(a, str):
                    tc["function"]["arguments"] = json.dumps(a)
        try:
            req = self.Req(**body)
            res = chat._process_messages(req, False)
            return {"token_ids": list(res.prompt_ids)}
        except Exception as e:
            return {"error": err(e)}


def run(engine, version, templates_dir, model_types=None):
    from .engine import Engine

    eng = Engine(engine, version, real=REAL)
    if engine == "vllm":
        from .vllm_chat import VllmChat

        sc = VllmChat(eng)
    else:
        sc = SglangChat(eng)
    import glob

    files, report = {}, {}
    for f in sorted(glob.glob(os.path.join(templates_dir, "*.json"))):
        doc = json.load(open(f))
        name = os.path.basename(f)
        if not doc.get("tokenizer_available", True):
            report[name] = {"skipped": "tokenizer_available: false (render-only profile)"}
            continue
        mt = (model_types or {}).get(doc["model"])
        t_profile = time.time()
        p = sc.profile(doc, mt, MODELS) if engine == "vllm" else sc.profile(doc, mt)
        if p is None:
            report[name] = {"skipped": f"no tokenizer files for {doc['model']}"}
            continue
        tok, paths = p
        ok, total, bad, cases = 0, 0, [], []
        for c in doc["cases"]:
            want_ids = (c.get("engine_token_ids") or {}).get(engine)
            want_err = (c.get("engine_errors") or {}).get(engine)
            if want_ids is None and want_err is None:
                continue
            total += 1
            got = (sc.chat_case if c["kind"] == "chat" else sc.completion_case)(paths, doc, c)
            cases.append({"id": c["id"], **got})
            if (want_err is not None and got.get("error") == want_err) or (want_err is None and got.get("token_ids") == want_ids):
                ok += 1
            else:
                bad.append((c["id"], [got.get("error") or "token_ids", f"want {want_err or want_ids}",
                                      f"got {got.get('token_ids')}"]))
        et = ((doc.get("engine_truth") or {}).get("engines") or {}).get(engine) or {}
        report[name] = {"reproduced": ok, "total": total, "differ": bad, "tokenizer_class": type(tok).__name__,
                        "tokenizer_class_recorded": et.get("tokenizer_class"), "recorded_with": et.get("version"),
                        "model_type_given": mt, "seconds": round(time.time() - t_profile, 1)}
        files[name] = {"profile": doc["profile"], "model": doc["model"], "engine": engine, "engine_version": version,
                       "cases": cases}
    versions = {p: __import__(p).__version__ for p in ("transformers", "tokenizers", "jinja2")}
    if hasattr(sc, "finish"):
        sc.finish()
    eng.standins = getattr(sc, "standins", [])
    return eng, report, files, versions


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m kit.chat")
    ap.add_argument("engine")
    ap.add_argument("version")
    ap.add_argument("--templates", default=os.path.join(ROOT, "testdata", "vectors", "templates"))
    ap.add_argument("--model-type", action="append", default=[], metavar="MODEL=TYPE",
                    help="config.json's model_type for a model whose folder has none (picks the tokenizer class)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    mts = dict(x.split("=", 1) for x in a.model_type)
    t0 = time.time()
    try:
        eng, report, files, versions = run(a.engine, a.version, a.templates, mts)
    except EngineChanged as e:
        print(f"KIT REFUSED ENGINE_CHANGED: {e}", file=sys.stderr)
        return 3
    out = {"report": report, "files": files, "versions": versions, "record": eng.record(),
           "seconds": round(time.time() - t0, 1)}
    if a.json:
        print(json.dumps(out))
    else:
        for f, r in report.items():
            print(f, r.get("skipped") or f"{r['reproduced']}/{r['total']}", r.get("differ", [])[:6])
    return 0


if __name__ == "__main__":
    if os.environ.get("KIT_CHAT_DEPS"):
        sys.path.insert(0, os.environ["KIT_CHAT_DEPS"])
    sys.exit(main())
