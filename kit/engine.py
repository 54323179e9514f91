"""Loading one engine release's own code from its unpacked wheel, and recording what ran.

`load(engine, version)` fetches the wheel (once, into `.kit-cache/wheels/`), unpacks its
Python sources (`.kit-cache/src/<engine>-<version>/`), installs the stubs and bare packages,
and returns an `Engine` whose `fn(module, qualname)` hands out the engine's own functions and
classes. Every object handed out is recorded with the sha256 of its source
(`inspect.getsource`), like the `engine_source_extracted` headers of the cache-hit vectors.

The kit relies on each such object having the parameters it calls it with (`RELIED` in the
engine modules): a function that is missing or whose parameters changed fails loudly with its
name (`EngineChanged`), and nothing is written.
"""

import hashlib
import importlib
import inspect
import os
import subprocess
import sys
import zipfile

from . import bare, stubs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".kit-cache")

# Modules the kit stubs: never run by the kit (GPU kernels, model code, HTTP stacks, ...).
STUBS = {
    "torch": "GPU tensors; the kit runs no model (dtype stand-ins with item sizes; "
    "torch.utils.cpp_extension.load builds the engine's own C++ with g++ + pybind11, kit/cppext.py)",
    "triton": "GPU kernels",
    "transformers": "model/tokenizer loading (real in the chat step's own process, kit/chat.py)",
    "tokenizers": "tokenizer library (real in the chat step's own process, kit/chat.py)",
    "huggingface_hub": "downloads",
    "safetensors": "weights",
    "fastapi": "HTTP server",
    "prometheus_client": "metrics",
    "aiohttp": "HTTP client",
    "requests": "HTTP client",
    "numba": "JIT kernels",
    "einops": "tensor ops",
    "mistral_common": "Mistral tokenizer (chat step only)",
    "openai_harmony": "GPT-OSS harmony encoding (vLLM's chat protocol and online renderer import it; "
    "used only for model_type gpt_oss)",
    "blake3": "media hashing (not on the block-hash path)",
    "pybase64": "media decoding",
    "tiktoken": "tokenizer",
    "vllm._C": "compiled CUDA ops",
    "vllm._custom_ops": "compiled CUDA ops",
    "flashinfer": "GPU kernels",
    "setproctitle": "process title",
    "uvloop": "event loop",
    "sentencepiece": "tokenizer",
    "cpuinfo": "usage stats",
    "uvicorn": "HTTP server",
    "starlette": "HTTP server",
    "sglang.kernels": "SGLang GPU kernels (triton/CUDA)",
    "sglang.srt.layers": "SGLang model layers and attention backends (GPU)",
    "sglang.srt.distributed": "SGLang NCCL / process groups",
    "sglang.srt.observability": "SGLang metrics",
    "sglang.srt.configs": "SGLang model configs (transformers)",
    "torchvision": "image decoding",
    "IPython": "notebook display",
    "torchaudio": "audio decoding",
    "decord": "video decoding",
    "soundfile": "audio",
    "pynvml": "GPU management",
    "nvidia": "CUDA libraries",
    "cuda": "CUDA bindings",
    "sgl_kernel": "compiled SGLang kernels",
    "flash_attn": "GPU kernels",
    "deep_gemm": "GPU kernels",
    "xgrammar": "grammar backend",
    "outlines": "grammar backend",
    "llguidance": "grammar backend",
    "dill": "pickling of custom logit processors (SGLang's schedule_batch imports it; never called)",
    "zmq.asyncio_x": "placeholder",
}


class EngineChanged(Exception):
    """An engine function the kit relies on is missing or has other parameters."""


def wheel_path(engine, version):
    d = os.path.join(CACHE, "wheels")
    os.makedirs(d, exist_ok=True)
    prefix = f"{engine}-{version}-"
    for f in os.listdir(d):
        if f.startswith(prefix) and f.endswith(".whl"):
            return os.path.join(d, f)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", d, f"{engine}=={version}"],
        check=True,
    )
    for f in os.listdir(d):
        if f.startswith(prefix) and f.endswith(".whl"):
            return os.path.join(d, f)
    raise FileNotFoundError(f"no wheel for {engine}=={version}")


def unpack(engine, version, wheel=None):
    """The directory holding the wheel's Python sources (unpacked once)."""
    dst = os.path.join(CACHE, "src", f"{engine}-{version}")
    marker = os.path.join(dst, ".kit-unpacked")
    if os.path.exists(marker):
        return dst, wheel or wheel_path(engine, version)
    wheel = wheel or wheel_path(engine, version)
    os.makedirs(dst, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            if n.startswith(f"{engine}/") and n.endswith((".py", ".cpp", ".h", ".hpp")) or ".dist-info/" in n:
                z.extract(n, dst)
    open(marker, "w").close()
    return dst, wheel


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Engine:
    """One engine release's code, imported from its unpacked wheel."""

    def __init__(self, engine, version, wheel=None, real=()):
        self.engine = engine
        self.version = version
        self.src, self.wheel = unpack(engine, version, wheel)
        self.ran = {}  # "module:qualname" -> "sha256:<hex of source>"
        self.real = tuple(real)  # stubbed elsewhere, imported for real here (the chat step)
        stubs.install({k: v for k, v in STUBS.items() if k not in self.real})
        bare.install(self.src, engine)

    def module(self, name):
        return importlib.import_module(name)

    def fn(self, module, qualname, params=None):
        """The engine's object `module:qualname`, recorded; `params`: the parameter names the
        kit passes (checked, in order, as a prefix of the signature)."""
        key = f"{module}:{qualname}"
        try:
            obj = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise EngineChanged(f"{key}: missing in {self.engine} {self.version} ({e})") from e
        if isinstance(obj, stubs._DummyMeta) or isinstance(obj, stubs._Dummy):
            raise EngineChanged(f"{key}: not defined by {self.engine} {self.version} (resolved to a stub)")
        if params is not None:
            target = obj.__init__ if inspect.isclass(obj) else obj
            try:
                names = [p for p in inspect.signature(target).parameters if p != "self"]
            except (TypeError, ValueError):
                names = None
            if names is not None and names[: len(params)] != list(params):
                raise EngineChanged(
                    f"{key}: parameters {names} in {self.engine} {self.version}; the kit calls it with {list(params)}"
                )
        try:
            src = inspect.getsource(obj.fget if isinstance(obj, property) else obj)
            self.ran[key] = "sha256:" + hashlib.sha256(src.encode()).hexdigest()
        except (OSError, TypeError):
            self.ran[key] = "sha256:(no source)"
        return obj

    def versions(self):
        """Versions of everything the kit imported for real (and the wheel itself)."""
        out = {
            self.engine: self.version,
            "wheel": os.path.basename(self.wheel),
            "wheel_sha256": sha256_file(self.wheel),
            "python": sys.version.split()[0],
        }
        for name in ["cbor2", "msgspec", "xxhash", "zmq", "numpy", "pydantic", "packaging", "PIL", "urllib3", "psutil",
                     "cloudpickle", "yaml", "openai", "regex", "transformers", "tokenizers", "jinja2", "huggingface_hub"]:
            m = sys.modules.get(name)
            if m is not None and not isinstance(m, stubs._StubModule):
                v = getattr(m, "__version__", None) or getattr(m, "VERSION", None)
                if v is None:
                    try:
                        from importlib.metadata import version as _v
                        v = _v({"zmq": "pyzmq", "PIL": "pillow", "yaml": "pyyaml", "huggingface_hub": "huggingface-hub"}.get(name, name))
                    except Exception:
                        v = "?"
                out[name] = str(v)
        return out

    def record(self):
        return {
            "engine": self.engine,
            "engine_version": self.version,
            "engine_functions_run": dict(sorted(self.ran.items())),
            "imported_versions": self.versions(),
            **stubs.installed(),
            "bare_package_names_stubbed": bare.hits(),
            "bare_package_inits": bare.inits(),
            "engine_sources_built": __import__("kit.cppext", fromlist=["BUILT"]).BUILT,
            # What the kit put in place of what the engine would get from torch or its launcher
            # (torch.cat/empty/tensor on index lists, the runtime context's parallel state).
            "kit_standins": getattr(self, "standins", []),
            "imported_for_real_here": list(self.real),
        }
