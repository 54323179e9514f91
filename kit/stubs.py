"""Stand-in modules for what the engines import but the kit never runs (torch, CUDA kernels, ...).

Every stub the kit installs is recorded (`installed()`), and qualification output lists them.
A stub is a module whose every attribute is a permissive dummy: it can be subclassed, called,
indexed and used as a decorator, so that engine modules *import*; any engine function the kit
runs that actually computes with a stub would produce dummy objects, which the kit's checks
against the expected value types (bytes digests, ints) turn into a loud failure.
"""

import importlib.abc
import importlib.machinery
import sys
import types

_INSTALLED = []  # (prefix, reason)
_HIT = set()


class _DummyMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Dummy

    def __getitem__(cls, item):
        return _Dummy

    def __iter__(cls):
        # Iterating a stubbed name (e.g. a tuple of config classes) yields nothing; without
        # this, __getitem__ would make it an endless sequence.
        return iter(())

    def __or__(cls, other):
        return _Dummy

    def __ror__(cls, other):
        return _Dummy

    def __call__(cls, *a, **k):
        # Used as a decorator with no arguments: return the function unchanged.
        if len(a) == 1 and not k and callable(a[0]) and not isinstance(a[0], _DummyMeta):
            return a[0]
        return super().__call__(*a, **k)


class _Dummy(metaclass=_DummyMeta):
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        if len(a) == 1 and not k and callable(a[0]):
            return a[0]
        return _Dummy()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Dummy()

    def __getitem__(self, item):
        return _Dummy()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __int__(self):
        return 0

    def __index__(self):
        return 0

    def __float__(self):
        return 0.0

    def __len__(self):
        return 0

    def __radd__(self, other):
        return other

    def __add__(self, other):
        return other

    def __str__(self):
        return ""

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        # A stubbed type in an engine's pydantic model validates anything.
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __mro_entries__(self, bases):
        return (_Dummy,)


class _StubModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []  # a package: submodules import too
        self.__file__ = "<kit stub>"
        self.__version__ = "0.0.0+kitstub"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name in self.__dict__.get("_kit_absent", ()):
            raise AttributeError(name)
        return _Dummy


class _DType:
    """A torch dtype stand-in: distinct, hashable, with its item size."""

    def __init__(self, name, itemsize):
        self.name = name
        self.itemsize = itemsize

    def __repr__(self):
        return f"torch.{self.name}"


_TORCH_DTYPES = {
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "float": 4, "half": 2,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int8": 1, "int16": 2,
    "int32": 4, "int64": 8, "long": 8, "int": 4, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
}


def _setup_torch(m):
    m.__dict__.update({k: _DType(k, v) for k, v in _TORCH_DTYPES.items()})
    m.dtype = _DType
    m.__version__ = "0.0.0+kitstub"
    # Accelerator back-ends that a CPU-only torch does not have (engines probe with hasattr).
    m._kit_absent = {"npu", "xpu", "musa", "mlu", "hpu"}


def _setup_cpp_extension(m):
    from . import cppext

    m.load = cppext.load
    m._get_build_directory = cppext._get_build_directory
    m.get_default_build_root = cppext.get_default_build_root


def _setup_uvloop(m):
    # SGLang's tokenizer_manager installs uvloop's policy at import: asyncio's own stands in.
    import asyncio

    m.EventLoopPolicy = asyncio.DefaultEventLoopPolicy


_SETUP = {"torch": _setup_torch, "torch.utils.cpp_extension": _setup_cpp_extension, "uvloop": _setup_uvloop}


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, prefixes):
        self.prefixes = prefixes

    def _match(self, fullname):
        return any(fullname == p or fullname.startswith(p + ".") for p in self.prefixes)

    def find_spec(self, fullname, path, target=None):
        if self._match(fullname):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        _HIT.add(spec.name)
        m = _StubModule(spec.name)
        if spec.name in _SETUP:
            _SETUP[spec.name](m)
        return m

    def exec_module(self, module):
        pass


_FINDER = None


def install(prefixes):
    """Stubs every module under `prefixes` ({prefix: reason}); returns the finder."""
    global _FINDER
    for p, why in prefixes.items():
        if p in sys.modules and not isinstance(sys.modules[p], _StubModule):
            raise RuntimeError(f"kit: {p} is already imported for real; cannot stub it")
        _INSTALLED.append((p, why))
    if _FINDER is None:
        _FINDER = _Finder([])
        sys.meta_path.insert(0, _FINDER)
    _FINDER.prefixes.extend(prefixes)
    return _FINDER


def installed():
    """Every stub prefix installed, with its reason, and the stub modules actually imported."""
    return {
        "stubs": [{"module": p, "why": w} for p, w in _INSTALLED],
        "stub_modules_imported": sorted(_HIT),
    }
