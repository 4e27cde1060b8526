"""generate()'s progress bar on stderr, drawn as tqdm draws it (nano-vllm and vLLM use tqdm)
without depending on tqdm:

  Generating:  40%|████      | 2/5 [00:03<00:04,  1.52it/s, est. speed input: 812.40 toks/s,
  output: 96.15 toks/s]          (one line)

Requests done out of requests queued, elapsed<remaining, requests per second, and the token
rates vLLM's bar shows: prompt tokens computed and completion tokens produced per second of
the whole call.
"""

import os
import sys
import time

_PARTIAL_BLOCKS = " ▏▎▍▌▋▊▉"  # 0/8 .. 7/8 of a cell
_FULL_BLOCK = "█"
_UNKNOWN_WIDTH_CELLS = 10  # the bar when stderr is no terminal (tqdm draws 10 then)
_REFRESH_SECONDS = 0.1  # tqdm's mininterval: redrawing every step would cost more than a step


def format_interval(seconds):
    """tqdm's MM:SS, or H:MM:SS past an hour."""
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours:d}:{m:02d}:{s:02d}" if hours else f"{m:02d}:{s:02d}"


def format_rate(done, elapsed):
    """'1.52it/s', or '3.20s/it' below one a second (tqdm flips it so); '?it/s' at first."""
    if elapsed <= 0 or done <= 0:
        return "?it/s"
    rate = done / elapsed
    return f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"


def format_bar_cells(fraction, width):
    """`width` cells filled to `fraction`, in eighths of a cell."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = int(fraction * width * 8)
    full, partial = divmod(eighths, 8)
    cells = _FULL_BLOCK * full
    if full < width:
        cells += _PARTIAL_BLOCKS[partial]
    return cells.ljust(width)


def format_line(done, total, elapsed, input_tokens, output_tokens, columns=None,
                desc="Generating"):
    """The whole line for `done` of `total` requests after `elapsed` seconds, `columns` wide
    (None, not a terminal: a bar of 10 cells, as tqdm draws it then)."""
    fraction = done / total if total else 1.0
    remaining = "?" if done <= 0 or elapsed <= 0 else format_interval(
        elapsed / done * (total - done))
    speed = ""
    if elapsed > 0:
        speed = (f", est. speed input: {input_tokens / elapsed:.2f} toks/s, "
                 f"output: {output_tokens / elapsed:.2f} toks/s")
    left = f"{desc}: {fraction * 100:3.0f}%|"
    right = (f"| {done}/{total} [{format_interval(elapsed)}<{remaining}, "
             f"{format_rate(done, elapsed)}{speed}]")
    width = _UNKNOWN_WIDTH_CELLS if columns is None else columns - len(left) - len(right)
    if width < 1:  # too narrow for a bar: tqdm drops it too
        return f"{desc}: {fraction * 100:3.0f}%{right[1:]}"
    return left + format_bar_cells(fraction, width) + right


def _columns(stream):
    """The terminal's width less one (writing the last column wraps some terminals); None
    when the stream is no terminal."""
    try:
        return os.get_terminal_size(stream.fileno()).columns - 1
    except (AttributeError, ValueError, OSError):
        return None


class ProgressBar:
    """Redraws one line with '\\r' at most every 0.1 s; close() draws the last state and ends
    the line."""

    def __init__(self, total, stream=None, desc="Generating", clock=time.monotonic):
        self.total = total
        self._stream = stream if stream is not None else sys.stderr
        self._desc = desc
        self._clock = clock
        self._start = clock()
        self._last_draw = None
        self.done = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self._closed = False
        self._draw()

    def update(self, done, input_tokens, output_tokens):
        """The call's totals so far (requests done, prompt and completion tokens)."""
        self.done, self.input_tokens, self.output_tokens = done, input_tokens, output_tokens
        if self._clock() - self._last_draw >= _REFRESH_SECONDS:
            self._draw()

    def _draw(self):
        self._last_draw = self._clock()
        line = format_line(self.done, self.total, self._last_draw - self._start,
                           self.input_tokens, self.output_tokens, _columns(self._stream),
                           self._desc)
        try:
            self._stream.write("\r" + line)
            self._stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not fail generate
            pass

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._draw()
        try:
            self._stream.write("\n")
            self._stream.flush()
        except (OSError, ValueError):
            pass
