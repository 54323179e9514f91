"""Imports an engine's modules from its unpacked wheel without running its package `__init__`s.

Engine packages (`vllm`, `vllm.config`, `sglang.srt`, ...) import most of the engine, torch and
CUDA kernels in their `__init__.py`. The kit registers each package directory as a *bare*
package: its submodules import normally (their own code runs), the `__init__.py` does not.
A name a module imports from a bare package that is neither a submodule nor set yet resolves to
a stub (recorded): such names are type annotations and config classes the kit never calls.
"""

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types

from . import stubs

_BARE_HITS = set()
_INIT_RAN = []
_INIT_FAILED = []


class _BarePackage(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") and name != "__all__":
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        for d in self.__path__:
            if os.path.exists(os.path.join(d, name + ".py")) or os.path.isdir(os.path.join(d, name)):
                return importlib.import_module(full)
        # A name the package's own `__init__.py` defines: run that file once, in the bare
        # package's namespace (its imports of heavy modules resolve to stubs or fail, in which
        # case the name stays a stub).
        if not self.__dict__.get("_kit_init_ran"):
            self.__dict__["_kit_init_ran"] = True
            init = os.path.join(self.__path__[0], "__init__.py")
            if os.path.exists(init):
                try:
                    code = compile(open(init).read(), init, "exec")
                    exec(code, self.__dict__)
                    _INIT_RAN.append(self.__name__)
                except Exception as e:  # recorded: the names it did not define stay stubs
                    _INIT_FAILED.append(f"{self.__name__}: {type(e).__name__}: {e}"[:200])
            if name in self.__dict__:
                return self.__dict__[name]
        if name == "__all__":
            raise AttributeError(name)
        _BARE_HITS.add(full)
        return stubs._Dummy


class _BareFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root, top):
        self.root = root
        self.top = top

    def find_spec(self, fullname, path, target=None):
        if fullname != self.top and not fullname.startswith(self.top + "."):
            return None
        d = os.path.join(self.root, *fullname.split("."))
        if os.path.isdir(d):
            spec = importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            spec.submodule_search_locations = [d]
            return spec
        return None  # plain modules: the normal path finder (package __path__)

    def create_module(self, spec):
        m = _BarePackage(spec.name)
        m.__path__ = list(spec.submodule_search_locations)
        m.__file__ = os.path.join(m.__path__[0], "__init__.py")
        return m

    def exec_module(self, module):
        pass


def install(root, top):
    """Imports of `top` (e.g. `vllm`) come from `root` with bare packages."""
    sys.meta_path.insert(0, _BareFinder(root, top))
    if root not in sys.path:
        sys.path.insert(0, root)


def hits():
    """Names resolved to stubs through bare packages."""
    return sorted(_BARE_HITS)


def inits():
    """Bare packages whose `__init__.py` ran on demand (a name was imported from it), and
    those whose `__init__.py` failed part way."""
    return {"ran": list(_INIT_RAN), "failed": list(_INIT_FAILED)}
