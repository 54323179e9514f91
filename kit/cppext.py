"""`torch.utils.cpp_extension.load` without torch: builds an engine's own C++ source from its
wheel, unmodified, as a plain pybind11 module (g++, the flags the engine asks for), once per
source digest, into `.kit-cache/build/`. SGLang's page hash (`hash_binding.cpp`) is built this
way: torch's loader would do the same compile with torch's headers on the include path, which
this source does not use."""

import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import sysconfig

BUILT = []  # (name, sources, sha256 of the sources, flags)


def load(name, sources, extra_cflags=None, extra_ldflags=None, with_cuda=False, verbose=False, **_):
    import pybind11

    from .engine import CACHE

    h = hashlib.sha256()
    for s in sources:
        h.update(open(s, "rb").read())
    digest = h.hexdigest()
    d = os.path.join(CACHE, "build")
    os.makedirs(d, exist_ok=True)
    so = os.path.join(d, f"{name}-{digest[:16]}{sysconfig.get_config_var('EXT_SUFFIX')}")
    cflags = list(extra_cflags or [])
    ldflags = list(extra_ldflags or [])
    if not os.path.exists(so):
        cmd = ["g++", "-shared", "-fPIC", *cflags, f"-DTORCH_EXTENSION_NAME={name}",
               f"-I{sysconfig.get_paths()['include']}", f"-I{pybind11.get_include()}",
               *sources, "-o", so, *ldflags]
        subprocess.run(cmd, check=True)
    BUILT.append({"name": name, "sources": [os.path.basename(s) for s in sources],
                  "sources_sha256": digest, "cflags": cflags, "ldflags": ldflags})
    loader = importlib.machinery.ExtensionFileLoader(name, so)
    spec = importlib.util.spec_from_file_location(name, so, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


def _get_build_directory(name, verbose=False):
    """torch's per-extension build folder, here under `.kit-cache/build/`."""
    from .engine import CACHE

    d = os.path.join(CACHE, "build", name)
    os.makedirs(d, exist_ok=True)
    return d


def get_default_build_root():
    from .engine import CACHE

    return os.path.join(CACHE, "build")
