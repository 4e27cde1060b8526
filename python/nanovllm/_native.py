"""libnanovllm.so through ctypes: finding it, declaring its C ABI (launcher/c_api.h), and
one `Engine` object per nv_engine handle.

ctypes rather than a compiled extension: one build of the library serves whatever Python 3
runs it (the GPU machines' 3.12 as well as Debian's 3.11), since JSON text is all that
crosses the boundary. ctypes releases the GIL for every foreign call, so a long engine step
does not stall other Python threads, and a Ctrl-C that arrives during one is raised by the
interpreter as soon as the call returns.
"""

import ctypes
import json
import os
import threading

from ._signals import deferred_sigint
from .errors import error_from

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_LIBRARY_NAME = "libnanovllm.so"
_WORKER_NAME = "nanovllm-worker"


def library_candidates():
    """Where the library is looked for, in order: $NANOVLLM_LIB, the copy installed inside
    the package (nanovllm/_lib/), then the build tree of the checkout this package sits in
    (python/nanovllm -> build/launcher), so tests run from a checkout need no install."""
    candidates = []
    env = os.environ.get("NANOVLLM_LIB")
    if env:
        candidates.append(env)
    candidates.append(os.path.join(_PACKAGE_DIR, "_lib", _LIBRARY_NAME))
    repo = os.path.dirname(os.path.dirname(_PACKAGE_DIR))
    candidates.append(os.path.join(repo, "build", "launcher", _LIBRARY_NAME))
    return candidates


def find_library():
    """The path of libnanovllm.so; ImportError listing the places tried when none exists.

    $NANOVLLM_LIB, when set, is the only candidate that counts: a user who names a library
    must not silently get another one."""
    env = os.environ.get("NANOVLLM_LIB")
    if env:
        if os.path.isfile(env):
            return env
        raise ImportError(f"NANOVLLM_LIB={env} does not exist")
    for path in library_candidates():
        if os.path.isfile(path):
            return path
    raise ImportError(
        "libnanovllm.so not found (looked at " + ", ".join(library_candidates()) + "); build it "
        "with scripts/install_python.sh, or set NANOVLLM_LIB to its path")


def find_worker(library_path):
    """The nanovllm-worker binary to start for ranks 1..N-1: $NANOVLLM_WORKER, else the one
    beside the library. None when neither exists: the library then uses its own default
    (beside itself) and reports a missing binary when tensor parallelism needs it."""
    env = os.environ.get("NANOVLLM_WORKER")
    if env:
        return env
    beside = os.path.join(os.path.dirname(os.path.abspath(library_path)), _WORKER_NAME)
    return beside if os.path.isfile(beside) else None


_lib = None
_lib_path = None
_lib_lock = threading.Lock()


def _declare(lib):
    """Argument and result types of every entry point. Strings the library returns are
    declared c_void_p, not c_char_p, so that we keep the pointer to hand back to nv_free."""
    out_error = ctypes.POINTER(ctypes.c_void_p)
    specs = {
        "nv_engine_create": (ctypes.c_void_p, [ctypes.c_char_p, out_error]),
        "nv_engine_destroy": (None, [ctypes.c_void_p]),
        "nv_engine_encode": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p, out_error]),
        "nv_engine_decode": (ctypes.c_void_p,
                             [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, out_error]),
        "nv_engine_apply_chat_template": (
            ctypes.c_void_p,
            [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, out_error]),
        "nv_engine_add_requests": (
            ctypes.c_int64, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, out_error]),
        "nv_engine_step": (ctypes.c_void_p, [ctypes.c_void_p, out_error]),
        "nv_engine_abort_all": (None, [ctypes.c_void_p]),
        "nv_engine_info": (ctypes.c_void_p, [ctypes.c_void_p, out_error]),
        "nv_free": (None, [ctypes.c_void_p]),
    }
    for name, (restype, argtypes) in specs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def library():
    """The loaded library (loaded once per process) and its path."""
    global _lib, _lib_path
    with _lib_lock:
        if _lib is None:
            path = find_library()
            lib = ctypes.CDLL(path)
            _declare(lib)
            _lib, _lib_path = lib, path
        return _lib, _lib_path


def _take_string(lib, pointer):
    """The text of a string the library returned, freed afterwards."""
    try:
        return ctypes.string_at(pointer).decode("utf-8")
    finally:
        lib.nv_free(pointer)


def _raise_error(lib, error_pointer, call):
    """Raises the exception a failed call reported through *error."""
    if not error_pointer.value:
        raise RuntimeError(f"{call} failed without saying why (the library broke its contract)")
    text = _take_string(lib, error_pointer.value)
    try:
        error = json.loads(text)
        type_name, message = error["type"], error["message"]
    except (ValueError, KeyError, TypeError):
        raise RuntimeError(f"{call} failed: {text}") from None
    raise error_from(type_name, message)


def _call_for_json(lib, call, fn, *args):
    """Runs an entry point that returns JSON text (NULL and *error on failure)."""
    error = ctypes.c_void_p()
    pointer = fn(*args, ctypes.byref(error))
    if not pointer:
        _raise_error(lib, error, call)
    return _take_string(lib, pointer)


class Engine:
    """One nv_engine: rank 0 in this process, its workers in others.

    Not thread-safe (the C contract forbids two threads in one engine at once); LLM keeps
    a lock around it. close() is idempotent, and every other method raises RuntimeError
    naming `closed_reason` once it ran.
    """

    def __init__(self, options):
        self._lib, path = library()
        options = dict(options)
        if "worker_path" not in options:
            worker = find_worker(path)
            if worker:
                options["worker_path"] = worker
        text = json.dumps(options).encode("utf-8")
        error = ctypes.c_void_p()
        self._handle = None
        self.closed_reason = None
        with deferred_sigint() as pending:
            self._handle = self._lib.nv_engine_create(text, ctypes.byref(error)) or None
        if pending.received:  # Ctrl-C while loading: the engine is not wanted any more
            self.close("it was interrupted while starting")
            raise KeyboardInterrupt
        if self._handle is None:
            self.closed_reason = "it failed to start"
            _raise_error(self._lib, error, "nv_engine_create")

    def _live_handle(self):
        if self._handle is None:
            raise RuntimeError(f"the engine was shut down ({self.closed_reason}); "
                               "create a new LLM")
        return self._handle

    @property
    def closed(self):
        return self._handle is None

    def close(self, reason="it was closed"):
        """nv_engine_destroy: stops the workers and removes the shared-memory segment."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self.closed_reason = reason
            self._lib.nv_engine_destroy(handle)

    def info(self):
        return json.loads(_call_for_json(self._lib, "nv_engine_info",
                                         self._lib.nv_engine_info, self._live_handle()))

    def encode(self, text):
        return json.loads(_call_for_json(self._lib, "nv_engine_encode",
                                         self._lib.nv_engine_encode, self._live_handle(),
                                         text.encode("utf-8")))

    def decode(self, token_ids, skip_special_tokens):
        return _call_for_json(self._lib, "nv_engine_decode", self._lib.nv_engine_decode,
                              self._live_handle(), json.dumps(token_ids).encode("utf-8"),
                              1 if skip_special_tokens else 0)

    def apply_chat_template(self, messages, add_generation_prompt, enable_thinking):
        return _call_for_json(self._lib, "nv_engine_apply_chat_template",
                              self._lib.nv_engine_apply_chat_template, self._live_handle(),
                              json.dumps(messages).encode("utf-8"),
                              1 if add_generation_prompt else 0, 1 if enable_thinking else 0)

    def add_requests(self, requests, first_index):
        """Queues `requests` (native request objects) with ids str(first_index + i): all of
        them, or none and a ValueError naming the first bad one."""
        error = ctypes.c_void_p()
        queued = self._lib.nv_engine_add_requests(self._live_handle(),
                                                  json.dumps(requests).encode("utf-8"),
                                                  first_index, ctypes.byref(error))
        if queued < 0:
            _raise_error(self._lib, error, "nv_engine_add_requests")
        return queued

    def step(self):
        """One engine step: {"outputs": [finished completions], "unfinished", ...}."""
        return json.loads(_call_for_json(self._lib, "nv_engine_step", self._lib.nv_engine_step,
                                         self._live_handle()))

    def abort_all(self):
        if self._handle is not None:
            self._lib.nv_engine_abort_all(self._handle)
