"""The exceptions the engine's errors become.

The C library reports a failure as {"type", "message"}; the type is one of Python's own
exception names (TypeError, ValueError, RuntimeError) or "WorkerDied", which gets its own
class so that a caller can tell a lost worker process (the engine is gone) from a bad
argument (the engine is fine).
"""


class WorkerDiedError(RuntimeError):
    """A worker process (a tensor-parallel rank > 0) died; the message names its rank.

    The engine cannot go on without it: the LLM is shut down, and using it again raises
    RuntimeError.
    """


_BY_TYPE = {
    "TypeError": TypeError,
    "ValueError": ValueError,
    "RuntimeError": RuntimeError,
    "WorkerDied": WorkerDiedError,
}


def error_from(type_name, message):
    """The exception for an error the library reported (an unknown type: RuntimeError)."""
    return _BY_TYPE.get(type_name, RuntimeError)(message)
