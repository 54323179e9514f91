"""The vLLM rules that are not hashes, each read by running (or, for a constant, reading) the
release's own code: the default block size, the token-id width of a request, whether the
frontend may supply block hashes, how prompt logprobs bound a prefix hit, what `tools: []`
does, the source of the event module, and the transformers / tokenizers versions the wheel
declares. Absent functions mean the rule does not exist in
the release (recorded as such), not an error."""

import hashlib
import inspect
import types


def probe(eng):
    r = {}
    cache = eng.module("vllm.config.cache")
    eng.fn("vllm.config.cache", "CacheConfig")
    r["default_block_size"] = cache.CacheConfig.DEFAULT_BLOCK_SIZE

    # Token ids of a request: vLLM 0.34 keeps them in an int32 TokenBuffer.
    try:
        tb = eng.module("vllm.v1.token_buffer")
        TB = eng.fn("vllm.v1.token_buffer", "TokenBuffer")
        try:
            TB([2**31])
            r["request_token_ids"] = "python-int"
        except (OverflowError, TypeError, ValueError):
            r["request_token_ids"] = "int32"
    except Exception:
        r["request_token_ids"] = "python-int"

    # Frontend-supplied prompt block hashes (EngineCoreRequest.block_hashes).
    kcu = eng.module("vllm.v1.core.kv_cache_utils")
    if hasattr(kcu, "frontend_block_hashes"):
        f = eng.fn("vllm.v1.core.kv_cache_utils", "frontend_block_hashes")
        req = types.SimpleNamespace(block_hashes=[b"x" * 32], prompt_token_ids=list(range(40)), prompt_embeds=None)
        try:
            got = f(req, None)
            r["frontend_block_hashes"] = "accepted-unchecked" if got else "ignored-without-config"
        except Exception as e:  # the rule exists; how it runs without a config is recorded
            r["frontend_block_hashes"] = f"exists ({type(e).__name__})"
    else:
        r["frontend_block_hashes"] = "none"

    # Prompt logprobs and the prefix hit (Request.get_prefix_cache_hit_limit, 0.34).
    rq = eng.module("vllm.v1.request")
    if hasattr(rq.Request, "get_prefix_cache_hit_limit"):
        f = eng.fn("vllm.v1.request", "Request.get_prefix_cache_hit_limit")
        sp = types.SimpleNamespace(skip_reading_prefix_cache=False, prompt_logprobs=1,
                                   prompt_logprob_token_ids=None, prompt_logprob_start=7)
        me = types.SimpleNamespace(sampling_params=sp, pooling_params=None)
        capped = f(me)
        sp.prompt_logprob_start = None
        unset = f(me)
        sp.skip_reading_prefix_cache = True
        skipped = f(me)
        r["prompt_logprobs"] = "cap-at-start" if (capped, unset, skipped) == (7, 0, 0) else f"other {capped, unset, skipped}"
    else:
        eng.fn("vllm.v1.request", "Request.get_skip_reading_prefix_cache")
        r["prompt_logprobs"] = "skip"

    # The event module, by source.
    kv = eng.module("vllm.distributed.kv_events")
    eng.fn("vllm.distributed.kv_events", "BlockStored")
    eng.fn("vllm.distributed.kv_events", "BlockRemoved")
    eng.fn("vllm.distributed.kv_events", "KVEventBatch")
    r["kv_events_source_sha256"] = hashlib.sha256(inspect.getsource(kv).encode()).hexdigest()
    r["block_stored_fields"] = list(kv.BlockStored.__struct_fields__)

    # The chat libraries the release declares (its wheel's METADATA `Requires-Dist`): the
    # tokenizer and template behaviour the chat path runs with.
    from .chat import ranges

    for pkg, spec in sorted(ranges(eng.src, "vllm", eng.version).items()):
        r[f"requires_{pkg}"] = spec
    return r


def probe_chat(eng):
    """`tools: []` on chat completions: run the request model's own validator."""
    r = {}
    try:
        proto = eng.module("vllm.entrypoints.openai.chat_completion.protocol")
        f = eng.fn("vllm.entrypoints.openai.chat_completion.protocol", "ChatCompletionRequest.check_tool_usage")
        data = {"messages": [{"role": "user", "content": "hi"}], "tools": []}
        try:
            out = f(data)
            r["empty_tools"] = "omitted" if out.get("tools") is None else "kept"
        except Exception as e:
            r["empty_tools"] = f"refused ({type(e).__name__})"
    except Exception as e:
        r["empty_tools"] = f"not run ({type(e).__name__}: {e})"[:160]
    return r
