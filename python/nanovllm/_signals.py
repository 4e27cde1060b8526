"""Holding a Ctrl-C back across the few lines where an interrupt would leak an engine.

Python raises KeyboardInterrupt at the first bytecode after a foreign call returns, which can
be before the handle nv_engine_create returned is stored anywhere: the workers and the
shared-memory segment would then outlive every reference to them. Inside `deferred_sigint()`
a SIGINT is only recorded; the caller stores what it must and then acts on it. Deferring costs
no latency: a foreign call cannot be interrupted by Python anyway.
"""

import contextlib
import signal
import threading


class _Pending:
    received = False


@contextlib.contextmanager
def deferred_sigint():
    """Yields an object whose `received` tells whether SIGINT came inside the block.

    Only where Python's own handler is installed and we are on the main thread (the only
    thread that may change handlers); elsewhere the block runs as is, never seeing one."""
    pending = _Pending()
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield pending
        return

    def record(_signum, _frame):
        pending.received = True

    signal.signal(signal.SIGINT, record)
    try:
        yield pending
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
