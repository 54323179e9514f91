"""vLLM's chat rendering and tokenizer loading, run by the release's own code (kit/chat.py
starts it in its own process, with transformers and tokenizers installed for real).

The path the template files' `engine_truth.engines.vllm` names, as the API server builds it:
* tokenizer and renderer: `vllm.renderers.registry.renderer_from_config(vllm_config)` ->
  `cached_tokenizer_from_config` -> `vllm.tokenizers.registry.get_tokenizer(model_dir)`
  (AutoTokenizer through `CachedHfTokenizer`, with the config vLLM's own
  `vllm.transformers_utils.config.get_config` reads from the folder's config.json), the
  tokenizer mode (`tokenizer_args_from_config`) and the registry's renderer class for it
  (`HfRenderer` for these models) built by its own `__init__` (`BaseRenderer.__init__`:
  thread pool, tokenizer copies);
* `OnlineRenderer(model_config, renderer, ...)` built by its own `__init__` with the server's
  defaults (no --chat-template, content format `auto`, no reasoning / tool parser) and
  `--enable-auto-tool-choice` (the files' request rule);
* chat: each case's body validated by `ChatCompletionRequest` (pydantic, its own validators),
  then `OnlineRenderer.render_chat(request)` -> `preprocess_chat` -> the renderer's
  `render_messages_async` (`parse_chat_messages_async`, `safe_apply_chat_template`), the
  tokenizer with the request's `add_special_tokens`; the engine input's `prompt_token_ids`, or
  the exception raised (class and message) / the `ErrorResponse` returned;
* completion: `CompletionRequest(model=..., prompt=...)` validated, then
  `OnlineRenderer.render_completion(request)`.

What the kit stands in for (recorded in the output, `kit_standins`, per profile):
* the model folder: symlinks to the project's tokenizer files under
  `.kit-cache/chat/vllm-models/`, plus a config.json of one field, `model_type`, when
  `--model-type MODEL=TYPE` gives one (without it there is no config.json: vLLM's get_config
  fails, the tokenizer loads from tokenizer_config.json alone, and `hf_config` is a namespace
  with `model_type` None);
* the `ModelConfig`: a namespace with `MODEL_CONFIG_DEFAULTS`, the folder as model and
  tokenizer, the HF id as served name and the `hf_config` vLLM's get_config returned; the
  fields the engine read are recorded;
* the `VllmConfig`: that model config and a parallel config (API process 0 of 1);
* the stubs added to the kit's (`EXTRA_STUBS`).
"""

import asyncio
import json
import os
import types

from .engine import CACHE, EngineChanged

# Stubs this step adds to the kit's (kit/engine.py STUBS, which has `openai_harmony`, imported
# by the chat path and used only for gpt_oss): none so far.
EXTRA_STUBS = {}

# The ModelConfig fields the render path reads (0.29.0-0.34.0; each run records the ones
# read), with the API server's defaults for a text-only decoder model started with no options.
# max_model_len is the one value the model's config would decide: a stand-in far above every
# case's length (it only bounds the prompt).
MODEL_CONFIG_DEFAULTS = {
    "runner_type": "generate",
    "tokenizer_mode": "auto",
    "tokenizer_revision": None,
    "revision": None,
    "code_revision": None,
    "trust_remote_code": False,
    "skip_tokenizer_init": False,
    "enable_prompt_embeds": False,
    "renderer_num_workers": 1,
    "supports_multimodal_inputs": False,
    "multimodal_config": None,
    "is_multimodal_model": False,
    "is_encoder_decoder": False,
    "max_model_len": 131072,
}


# Functions the renderer's module calls on the chat path (recorded where they are defined).
INNER = ("parse_chat_messages_async", "safe_apply_chat_template", "resolve_chat_template",
         "resolve_chat_template_content_format", "resolve_chat_template_kwargs", "parse_dec_only_prompt")


def model_dir(model, model_type, models):
    """A copy (symlinks) of the project's tokenizer files for `model` under .kit-cache, with a
    config.json holding `model_type` only (or none when no type is given)."""
    for base in models:
        d = os.path.join(base, model.replace("/", "__"))
        if os.path.exists(os.path.join(d, "tokenizer_config.json")):
            break
    else:
        return None, None
    o = os.path.join(CACHE, "chat", "vllm-models", f"{model.replace('/', '__')}-{model_type or 'none'}")
    os.makedirs(o, exist_ok=True)
    for f in os.listdir(d):
        if f != "config.json" and not os.path.exists(os.path.join(o, f)):
            os.symlink(os.path.join(d, f), os.path.join(o, f))
    cfg = os.path.join(o, "config.json")
    if model_type:
        json.dump({"model_type": model_type}, open(cfg, "w"))
    elif os.path.exists(cfg):
        os.remove(cfg)
    return o, d


class StandInMissing(AttributeError):
    """The engine read a field the kit's stand-in does not have."""


class ReadLog(types.SimpleNamespace):
    """A stand-in namespace that records which of its fields the engine read (and says which
    one it lacks)."""

    def __getattribute__(self, k):
        if not k.startswith("_"):
            if k != "kit_read":
                object.__getattribute__(self, "__dict__").setdefault("_kit_read", set()).add(k)
        try:
            return object.__getattribute__(self, k)
        except AttributeError:
            if k.startswith("__"):
                raise
            raise StandInMissing(f"the kit's {object.__getattribute__(self, '_kit_what')} stand-in has no field "
                                 f"{k!r}") from None

    def kit_read(self):
        return sorted(self.__dict__.get("_kit_read", ()))


def err(e):
    return f"{type(e).__name__}: {e}"


class VllmChat:
    def __init__(self, eng):
        from . import stubs

        self.eng = eng
        if EXTRA_STUBS:
            stubs.install(EXTRA_STUBS)
        self.standins = []
        reg = "vllm.tokenizers.registry"
        eng.fn(reg, "get_tokenizer", ["tokenizer_name"])
        self.cached_tokenizer = eng.fn(reg, "cached_tokenizer_from_config", ["model_config"])
        self.tok_args = eng.fn(reg, "tokenizer_args_from_config", ["config"])
        eng.fn(reg, "resolve_tokenizer_args", ["tokenizer_name"])
        eng.fn("vllm.tokenizers.hf", "CachedHfTokenizer.from_pretrained", ["path_or_repo_id"])
        eng.fn("vllm.tokenizers.hf", "get_cached_tokenizer", ["tokenizer"])
        self.get_config = eng.fn("vllm.transformers_utils.config", "get_config", ["model"])
        self.renderer_from_config = eng.fn("vllm.renderers.registry", "renderer_from_config", ["config"])
        eng.fn("vllm.renderers.registry", "RendererRegistry.load_renderer", ["renderer_mode", "config", "tokenizer"])
        eng.fn("vllm.renderers.base", "BaseRenderer", ["config", "tokenizer"])
        on = "vllm.renderers.online_renderer"
        self.Online = eng.fn(on, "OnlineRenderer", ["model_config", "renderer"])
        eng.fn(on, "OnlineRenderer.render_chat", ["request"])
        eng.fn(on, "OnlineRenderer.render_completion", ["request"])
        eng.fn(on, "OnlineRenderer.preprocess_chat", ["request", "messages"])
        eng.fn(on, "OnlineRenderer.preprocess_cmpl", ["request", "prompts"])
        self.Req = eng.fn("vllm.entrypoints.openai.chat_completion.protocol", "ChatCompletionRequest")
        self.CReq = eng.fn("vllm.entrypoints.openai.completion.protocol", "CompletionRequest")
        self.ErrorResponse = eng.fn("vllm.entrypoints.serve.engine.protocol", "ErrorResponse")

    def model_config(self, d, model, hf_config):
        fields = dict(MODEL_CONFIG_DEFAULTS, model=d, tokenizer=d, served_model_name=model, hf_config=hf_config,
                      hf_text_config=hf_config)
        return ReadLog(_kit_what="ModelConfig", **fields)

    def profile(self, doc, model_type, models):
        d, src = model_dir(doc["model"], model_type, models)
        if d is None:
            return None
        try:
            hf_config = self.get_config(d, trust_remote_code=False)
            hf_from = "vllm.transformers_utils.config.get_config(config.json)"
        except (ValueError, OSError) as e:
            hf_config = types.SimpleNamespace(model_type=None)
            hf_from = f"none ({err(e)[:120]}): a namespace with model_type None"
        mc = self.model_config(d, doc["model"], hf_config)
        vc = ReadLog(_kit_what="VllmConfig", model_config=mc,
                     parallel_config=types.SimpleNamespace(_api_process_rank=0, _api_process_count=1))
        # The server's own construction: tokenizer (cached_tokenizer_from_config -> get_tokenizer),
        # renderer mode (tokenizer_args_from_config), the registry's renderer class built over them.
        try:
            renderer = self.renderer_from_config(vc)
        except StandInMissing as e:
            raise EngineChanged(
                f"vllm.renderers.registry:renderer_from_config: {e} in vllm {self.eng.version} (add the server's "
                "default to kit/vllm_chat.py MODEL_CONFIG_DEFAULTS after reading what it does; --no-chat "
                "qualifies the rest)") from e
        tok = self.cached_tokenizer(mc)  # the loaded tokenizer (lru cache: the one the renderer got)
        mode = self.tok_args(mc)[0]
        Renderer = type(renderer)
        self.eng.fn(Renderer.__module__, Renderer.__qualname__, ["config", "tokenizer"])
        self.record_inner(Renderer)
        online = self.Online(mc, renderer, request_logger=None, chat_template=None,
                             chat_template_content_format="auto", enable_auto_tools=True)
        self.standins.append(standin := {
            "profile": doc["profile"], "model_folder": os.path.relpath(d, CACHE), "tokenizer_files_from": src,
            "config_json": {"model_type": model_type} if model_type else "(none)", "hf_config": hf_from,
            "model_config": {k: v for k, v in MODEL_CONFIG_DEFAULTS.items()} | {
                "model": "<model folder>", "tokenizer": "<model folder>", "served_model_name": doc["model"],
                "hf_config": hf_from},
            "vllm_config": "namespace: model_config, parallel_config(_api_process_rank=0, _api_process_count=1)",
            "renderer": f"{Renderer.__module__}.{Renderer.__qualname__} (tokenizer mode {mode})",
            "online_renderer": "chat_template=None, chat_template_content_format='auto', enable_auto_tools=True",
        })
        standin["_read"] = (mc, vc)
        return tok, online

    def finish(self):
        """The stand-ins' fields the engine read (after every case ran)."""
        for s in self.standins:
            mc, vc = s.pop("_read")
            s["model_config_fields_read"] = mc.kit_read()
            s["vllm_config_fields_read"] = vc.kit_read()

    def record_inner(self, Renderer):
        """Records the functions the renderer's module calls on the chat path (wherever the
        release defines them: `vllm.entrypoints.chat_utils` up to 0.31, `vllm.renderers.chat_utils`
        from 0.33): the kit reaches them only through the engine's own calls."""
        import sys

        mod = sys.modules[Renderer.__module__]
        self.eng.fn(Renderer.__module__, Renderer.__qualname__ + ".render_messages_async", ["messages", "params"])
        for name in INNER:
            obj = getattr(mod, name, None)
            if obj is not None and getattr(obj, "__module__", "").startswith("vllm."):
                self.eng.fn(obj.__module__, obj.__qualname__)

    def _result(self, res):
        if isinstance(res, self.ErrorResponse):
            e = res.error
            return {"error": f"{e.type}: {e.message}", "error_response": True}
        _, inputs = res if isinstance(res, tuple) else (None, res)
        if len(inputs) != 1:
            return {"error": f"kit: {len(inputs)} engine inputs"}
        return {"token_ids": list(inputs[0]["prompt_token_ids"])}

    def completion_case(self, online, doc, c):
        try:
            req = self.CReq(model=doc["model"], prompt=c["prompt"])
            return self._result(asyncio.run(online.render_completion(req)))
        except Exception as e:
            return {"error": err(e)}

    def chat_case(self, online, doc, c):
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
            return self._result(asyncio.run(online.render_chat(req)))
        except Exception as e:
            return {"error": err(e)}
