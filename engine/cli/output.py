"""What every command prints: times with their zone, inert store text, aligned tables, JSON or
human output, progress on stderr. Shared by all the CLI's command modules."""
from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator

from engine.format.timefmt import format_time
from engine.tasks import CancelToken

EXIT_ERROR = 2
EXIT_CANCELLED = 130   # Ctrl-C: the shell's 128 + SIGINT


class CliError(Exception):
    pass


# ---- Ctrl-C ------------------------------------------------------------------------------
@contextlib.contextmanager
def cancel_on_sigint(cancel: CancelToken) -> Iterator[CancelToken]:
    """Inside the block Ctrl-C cancels `cancel` (the task stops at its next poll, where nothing
    is half-written) instead of raising KeyboardInterrupt: a KeyboardInterrupt raised wherever
    the main thread happens to be can be lost (in a finalizer or a C callback it is only an
    "Exception ignored") and the command then runs to its end; a flag the task polls is never
    lost. A second Ctrl-C raises KeyboardInterrupt (who presses twice wants out now). Only the
    main thread can set a handler, and a SIGINT the process was started ignoring (a background
    job) stays ignored: then nothing is installed. The previous handler is back on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        yield cancel
        return
    pressed = [False]

    def on_sigint(signum, frame) -> None:
        if pressed[0]:
            raise KeyboardInterrupt
        pressed[0] = True
        cancel.cancel()
    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield cancel
    finally:   # (None: a handler not set from Python, which cannot be put back; Python's own then)
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def cancelled(what: str, note: str = "") -> int:
    """The one line on stderr of a command Ctrl-C stopped (on a terminal in place of the
    progress line); returns EXIT_CANCELLED."""
    if sys.stderr.isatty():
        print("\r" + " " * 79 + "\r", end="", file=sys.stderr)
    print(f"rmqstore: {what} cancelled" + (f"; {note}" if note else ""), file=sys.stderr, flush=True)
    return EXIT_CANCELLED


# ---- argument types ----------------------------------------------------------------------
def _int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{v} {what}")
        return v
    parse.__name__ = "int"  # argparse names the type in its "invalid int value" message
    return parse


# counts, caps, limits, offsets and queue ids: argparse refuses a bad one with exit 2 and says
# why, before any store is opened (a negative cap once meant "truncated" with nothing shown)
nonneg = _int_at_least(0, "must not be negative")
positive = _int_at_least(1, "must be 1 or more")


class OneLineParser(argparse.ArgumentParser):
    """A command's parser whose refusals are one line, like every other error of the CLI
    (the usage is one -h away), with argparse's exit code 2."""

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (usage: {self.prog} -h)\n")

    def _parse_optional(self, arg_string):
        """A word like `-GfnRNojt` that names no option of the command is an operand: RocketMQ
        topics and keys may begin with '-' ([%|a-zA-Z0-9_-]+), and argparse would take it for an
        unknown option and then miss an argument. `--...` words stay options (a mistyped
        `--jsn` is still refused by name); '--' before the operands works as well."""
        r = super()._parse_optional(arg_string)
        first = r[0] if isinstance(r, list) and r else r   # (action, ...): one tuple, or a list (3.12.7+)
        if (isinstance(first, tuple) and first[0] is None and len(arg_string) > 1
                and arg_string[0] == "-" and arg_string[1] != "-"):
            return None
        return r


# ---- formatting ------------------------------------------------------------------------
def fmt_time(ms: int) -> str:
    """The machine's zone at that instant (engine.format.timefmt); '-' when missing."""
    if ms is None or ms < 0:
        return "-"
    return format_time(ms) or str(ms)


def safe(text: str) -> str:
    """Store text (topics, tags, keys: anything a producer chose) made inert for a terminal:
    control characters and bidi overrides are shown escaped, never sent to the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else
                   (f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}") for c in text)


def _clip(text: str, width: int = 48) -> str:
    text = safe(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: list[list], headers: list[str]) -> str:
    """Aligned columns; over-long cells (127-character topics) are clipped with an ellipsis."""
    cells = [[_clip(str(c)) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def emit(args, obj, human: str) -> None:
    if args.json:
        print(json.dumps(obj, ensure_ascii=False))
    else:
        print(human)


def stderr_progress(every: float = 1.0):
    """A Progress printer for stderr: one \\r line kept current on a terminal, else a line
    about every `every` seconds (logs stay short); the final state is always printed."""
    tty = sys.stderr.isatty()
    last = [0.0]

    def show(p) -> None:
        now = time.monotonic()
        final = p.total and p.done >= p.total
        if not tty and now - last[0] < every and not final:
            return
        last[0] = now
        text = p.message or f"{p.phase or 'working'}: {p.done:,}/{p.total:,} {p.unit}".rstrip()
        sys.stderr.write(f"\r{text[:78]:<78}" + ("\n" if final else "") if tty else text + "\n")
        sys.stderr.flush()
    return show


def rate_progress(stream=None, tty: bool | None = None, every: float = 1.0, clock=time.monotonic):
    """stderr_progress with the rate and the time left, for long writes (`demo`): "demo:
    120,000/2,000,000 messages (6%), 48,210 messages/s, ETA 0:39"; the final line gives the
    average rate and the time taken. A terminal gets one \\r line kept current, anything
    else a line about every `every` seconds."""
    out = stream if stream is not None else sys.stderr
    tty = out.isatty() if tty is None else tty
    state = {"start": None, "last": None}

    def show(p) -> None:
        now = clock()
        if state["start"] is None:
            state["start"] = now
        final = p.done >= p.total and not p.message
        if not final and state["last"] is not None and now - state["last"] < (0.1 if tty else every):
            return
        state["last"] = now
        secs = now - state["start"]
        rate = p.done / secs if secs > 0 else 0.0
        if p.message:
            text = p.message
        else:
            text = f"{p.phase or 'working'}: {p.done:,}/{p.total:,} {p.unit}".rstrip()
            if final:
                text += f", {rate:,.0f} {p.unit or 'units'}/s, {secs:.1f} s" if rate else ""
            elif p.total:
                text += f" ({100 * p.done // p.total}%)"
                if rate:
                    eta = int((p.total - p.done) / rate + 0.5)
                    text += f", {rate:,.0f} {p.unit or 'units'}/s, ETA {eta // 60}:{eta % 60:02d}"
        out.write((f"\r{text[:79]:<79}" + ("\n" if final else "")) if tty else text + "\n")
        out.flush()
    return show


# ---- decoded bodies (engine.format.body_decode) -------------------------------------------
def add_body_options(sp) -> None:
    """--proto-desc/--proto-type, --avro-schema, --body-format and --decoded on a command
    that shows messages; --json always carries `decodedBody`."""
    from engine.format.body_decode import FORMATS
    g = sp.add_argument_group("decoded bodies")
    g.add_argument("--proto-desc", metavar="FILE", help="Protobuf descriptor set (protoc --descriptor_set_out "
                   "--include_imports) for the bodies; with --proto-type")
    g.add_argument("--proto-type", metavar="TYPE", help="the bodies' message type, e.g. shop.Order")
    g.add_argument("--avro-schema", metavar="FILE", help="Avro schema (.avsc) the bodies are written with")
    g.add_argument("--body-format", choices=FORMATS, help="decode the bodies as this format (default: detected)")
    g.add_argument("--decoded", action="store_true", help="human output: each body decoded, below the table")


def body_schemas(args):
    """The Schemas the flags name (SchemaError, a ValueError, for a bad file: exit 2)."""
    from engine.format.body_decode import Schemas
    desc, typ, avsc = (getattr(args, k, None) for k in ("proto_desc", "proto_type", "avro_schema"))
    if not (desc or typ or avsc):
        return None
    return Schemas(desc, typ, avsc)


def decode_into(args, rows: list[dict], msgs, schemas=None) -> list:
    """Each JSON row gains `decodedBody` for its message; returns the DecodedBody list."""
    from engine.format.body_decode import decode_message
    out = []
    for j, m in zip(rows, msgs):
        d = decode_message(m, schemas, getattr(args, "body_format", None))
        j["decodedBody"] = d.to_json()
        out.append(d)
    return out


def decoded_lines(decoded: list, msgs) -> str:
    """Human lines: queue offset, format (compression, confidence), the value on one line."""
    lines = []
    for d, m in zip(decoded, msgs):
        comp = f", {d.compression}" if d.compression else ""
        value = d.value if isinstance(d.value, str) else json.dumps(d.value, ensure_ascii=False)
        if len(value) > 400:
            value = value[:399] + "…"
        lines.append(f"  {m.queueOffset}: {d.format}{comp} ({d.confidence:.2f}) {safe(value)}"
                     + (f"  [{safe(d.note)}]" if d.note else ""))
    return "\n".join(["decoded bodies:"] + lines) if lines else ""
