"""effect-agent's prompt messages, sized without building them (the seed engine's arithmetic).

The seed engine estimates a message as ceil(UTF-8 bytes of ``JSON.stringify(message)`` / 4), where the
message is an Effect ``Prompt`` message: its type ids, role, options, parts and JSON escapes all count.
Here each message's serialized size is the fixed framing of its role and parts (measured once from the
same object shapes) plus the JSON-escaped sizes of what varies: texts, tool call ids, tool results.

Also here: the tool-result envelope (``applyToolResultBounds``: head/tail of the encoded result's JSON
text, shrunk until the envelope fits), and the size of the summarizer's one user message
(``renderForSummary``: per-message clip, whole-transcript budget with middle elision), both on the
real text when the trace has it and on a stand-in of the recorded sizes when it does not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from sim.tokens import json_bytes

PART_ID = "~effect/ai/Prompt/Part"
MESSAGE_ID = "~effect/ai/Prompt/Message"
TOOL_NAME = "bash"  # the canonical trace records no tool names; every call and result is named so
CLEARED_RESULT = "[tool result cleared by compaction]"
SUMMARY_PREFIX = "The prior conversation was compacted into this summary:\n\n"
NO_SUMMARY = "(no summary produced)"  # what the engine keeps when the summarizer's text is empty
INSTRUCTION_CHARS = 442  # the summarizer instruction (ASCII): the transcript's fixed head
OUTPUT_CONTRACT_TOKENS = 85  # estimate of the output-contract system message for a string output
# JSON text of the synthetic result of a rejected tool call ({"_tag", "limit", "message"}), without the
# digits of the limit the message names (tool calls: maxToolCalls; tokens: tokenBudget)
REJECTION_BYTES = {"tool-calls": 270, "tokens": 259}
MESSAGE_CLIP = 2000  # characters (UTF-16 code units) of one rendered message in the transcript
RESULT_CLIP = 2000  # of a tool result's JSON text inside it
INPUT_BUDGET = 80000  # characters of the whole summarizer request
ELISION_RESERVE = 128


def _size(obj) -> int:
    return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode())


def _part(kind: str, **fields) -> dict:  # Prompt.makePart
    return {**fields, PART_ID: PART_ID, "type": kind, "options": {}}


def _message(role: str, content) -> dict:  # Prompt.makeMessage
    return {"content": content, MESSAGE_ID: MESSAGE_ID, "role": role, "options": {}}


# framing bytes: each is the serialized size with every varying string empty ("" = 2 bytes, removed)
TEXT_PART = _size(_part("text", text="")) - 2
CALL_PART = _size(_part("tool-call", id="", name=TOOL_NAME, params={}, providerExecuted=False)) - 2
RESULT_PART = (
    _size(_part("tool-result", id="", name=TOOL_NAME, result="", isFailure=False, providerExecuted=False)) - 4
)
MESSAGE = {r: _size(_message(r, "")) - 2 for r in ("system", "user", "assistant", "tool")}
CLEARED_RESULT_JSON = json_bytes(CLEARED_RESULT)
SUMMARY_PREFIX_JSON = json_bytes(SUMMARY_PREFIX) - 2  # its escaped bytes inside the text's quotes


def estimate(nbytes: int) -> int:
    """estimateMessageTokens of a message whose JSON text has ``nbytes`` bytes."""
    return -(-nbytes // 4)


def parts_bytes(parts: Sequence[int]) -> int:
    """A content array of parts of these sizes: brackets and commas."""
    return 2 + sum(parts) + max(len(parts) - 1, 0)


def text_message(role: str, text_json: int) -> int:
    """A user (or assistant) message holding one text part whose text's JSON is ``text_json`` bytes."""
    return MESSAGE[role] + parts_bytes((TEXT_PART + text_json,))


def summary_message(summary_bytes: int) -> int:
    """The summary message: the prefix plus an ASCII summary text of ``summary_bytes`` (no escapes)."""
    return text_message("user", 2 + SUMMARY_PREFIX_JSON + summary_bytes)


def result_part(id_json: int, result_json: int, failed: bool = False) -> int:
    return RESULT_PART + id_json + result_json - (1 if failed else 0)  # "true" is one byte shorter


def call_part(id_json: int) -> int:
    return CALL_PART + id_json


def rejection_bytes(limit: str, value: int) -> int:
    return REJECTION_BYTES[limit] + len(str(value))


# ------------------------------------------------------------------------------------------- stand-in
def stand_in(nbytes: int, escapes: int) -> str:
    """Text for an event the trace holds no text for: ``nbytes`` ASCII characters, ``escapes`` of them
    newlines spread evenly (each escapes to two bytes in JSON). Deterministic, so the oracle and the
    policy size the same text."""
    k = min(max(escapes, 0), nbytes // 2)
    chars = ["abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(nbytes)]
    for j in range(k):
        chars[(j + 1) * nbytes // (k + 1)] = "\n"
    return "".join(chars)


# ------------------------------------------------------------------------------------ tool-result bound
def _prefix_within(raw: bytes, limit: int) -> bytes:
    p = min(limit, len(raw))
    while 0 < p < len(raw) and (raw[p] & 0xC0) == 0x80:  # never inside a character
        p -= 1
    return raw[:p]


def _suffix_within(raw: bytes, limit: int) -> bytes:
    s = max(len(raw) - limit, 0)
    while s < len(raw) and (raw[s] & 0xC0) == 0x80:
        s += 1
    return raw[s:]


def bound_result(encoded: str, max_bytes: int) -> str | None:
    """applyToolResultBounds on a result's JSON text: None within bounds, else the envelope's JSON text
    (an exact head and tail of ``encoded`` split ~50/50 over the budget left after the envelope's own
    overhead, shrunk until the envelope, escapes included, fits ``max_bytes``)."""
    raw = encoded.encode()
    original = len(raw)
    if original <= max_bytes:
        return None

    def render(head: bytes, tail: bytes) -> str:
        envelope = {
            "truncatedToolResult": True,
            "originalBytes": original,
            "head": head.decode(),
            "tail": tail.decode(),
        }
        return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))

    minimal = render(b"", b"")
    budget = max_bytes - len(minimal.encode())
    if budget <= 0:
        return minimal
    head_budget = budget // 2
    tail_budget = budget - head_budget
    while True:
        out = render(_prefix_within(raw, head_budget), _suffix_within(raw, tail_budget))
        size = len(out.encode())
        if size <= max_bytes:
            return out
        if head_budget == 0 and tail_budget == 0:
            return minimal
        shrink = max(1, math.ceil((size - max_bytes) / 2))
        head_budget, tail_budget = max(0, head_budget - shrink), max(0, tail_budget - shrink)


# ----------------------------------------------------------------------------------- summarizer input
class Piece:
    """A text the transcript renders, known either as a string or, without text, by its UTF-16 length
    and UTF-8 bytes (a prefix's bytes are then taken in proportion: exact for ASCII)."""

    __slots__ = ("text", "units", "nbytes")

    def __init__(self, text: str | None = None, units: int = 0, nbytes: int = 0) -> None:
        self.text = text
        if text is not None:
            units, nbytes = _units(text), len(text.encode())
        self.units, self.nbytes = units, nbytes

    def prefix(self, n: int) -> tuple[int, int]:
        """(UTF-16 units, UTF-8 bytes) of the first ``n`` units, as JavaScript's ``slice`` cuts them
        (a surrogate pair cut in half leaves a lone surrogate: 3 bytes once encoded)."""
        n = min(n, self.units)
        if self.text is None:
            return n, (self.nbytes * n // self.units if self.units else 0)
        return n, _prefix16_bytes(self.text, n)


def _units(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def _prefix16_bytes(text: str, n: int) -> int:
    head = text[:n]  # n code points hold at least n units
    if head.isascii():
        return len(head)
    u16 = head.encode("utf-16-le", "surrogatepass")[: 2 * n]
    return len(u16.decode("utf-16-le", "surrogatepass").encode("utf-8", "surrogatepass"))


def ascii_piece(n: int) -> Piece:
    return Piece(None, n, n)


def text_piece(text: str | None, units: int, nbytes: int) -> Piece:
    """A text as the transcript may show it: only its first MESSAGE_CLIP + 1 characters matter."""
    return Piece(None, units, nbytes) if text is None else Piece(text[: MESSAGE_CLIP + 1])


def json_piece(text: str | None, units: int, nbytes: int) -> Piece:
    """The JSON text of a string (a tool result as the transcript shows it): escaped from the text when
    known, its first RESULT_CLIP + 1 characters being all that can show; else sized."""
    if text is None:
        return Piece(None, units, nbytes)
    return Piece(json.dumps(text[: RESULT_CLIP + 1], ensure_ascii=False))


Segment = tuple[str, Piece | None, int | None, str]  # prefix, piece, the piece's own clip, suffix


def block(role: str, segments: Sequence[Segment]) -> tuple[int, int] | None:
    """One transcript block: ``[role]\\n`` + the message's part texts joined by newlines, clipped at
    MESSAGE_CLIP UTF-16 units (+ "…"). Returns (units, bytes), None when the text is empty."""
    runs: list[tuple[int, int, Piece | None]] = []  # (units, bytes, piece a cut takes a prefix of)
    for j, (pre, piece, clip, post) in enumerate(segments):
        if j:
            runs.append((1, 1, None))
        runs.append((len(pre), len(pre.encode()), None))
        if piece is not None:
            u, b = (
                piece.prefix(clip) if clip is not None and piece.units > clip else (piece.units, piece.nbytes)
            )
            runs.append((u, b, piece))
        runs.append((len(post), len(post.encode()), None))
    total = sum(r[0] for r in runs)
    if total == 0:
        return None
    if total > MESSAGE_CLIP:
        units = nbytes = 0
        left = MESSAGE_CLIP
        for u, b, piece in runs:
            if left <= 0:
                break
            if u <= left:
                units, nbytes, left = units + u, nbytes + b, left - u
            else:  # framing strings are ASCII: a cut in them keeps as many bytes as units
                cu, cb = piece.prefix(left) if piece is not None else (left, left)
                units, nbytes, left = units + cu, nbytes + cb, 0
        units, nbytes = units + 1, nbytes + 3  # "…"
    else:
        units, nbytes = total, sum(r[1] for r in runs)
    head = len(role) + 3  # "[" role "]" and a newline
    return units + head, nbytes + head


def prompt_bytes(blocks: Sequence[tuple[int, int]], previous_summary: int | None) -> tuple[int, int]:
    """UTF-8 bytes of the summarizer's user message (instruction, ``<transcript>``, the previous summary
    block and the covered blocks, middle-elided to the input budget), and how many blocks were elided."""
    joiner = 2
    prev = None if previous_summary is None else 19 + previous_summary  # "[Previous summary]\n" + text
    fixed = (0 if prev is None else prev + joiner) + INSTRUCTION_CHARS
    budget = INPUT_BUDGET - fixed - ELISION_RESERVE
    selected = list(blocks)
    omitted = 0
    if sum(u + joiner for u, _ in blocks) > budget:
        head_n = tail_n = head_len = tail_len = 0
        start, end = 0, len(blocks) - 1
        half = budget // 2
        while start <= end and head_len + blocks[start][0] + joiner <= half:
            head_len += blocks[start][0] + joiner
            start, head_n = start + 1, head_n + 1
        while end >= start and head_len + tail_len + blocks[end][0] + joiner <= budget:
            tail_len += blocks[end][0] + joiner
            end, tail_n = end - 1, tail_n + 1
        omitted = end - start + 1
        selected = list(blocks[:head_n])
        if omitted > 0:
            marker = f"[… {omitted} messages omitted from summary input …]"
            selected.append((len(marker), len(marker.encode())))
        selected += list(blocks[len(blocks) - tail_n :]) if tail_n else []
    lines = ([] if prev is None else [prev]) + [b for _, b in selected]
    transcript = sum(lines) + joiner * max(len(lines) - 1, 0)
    return INSTRUCTION_CHARS + len("\n\n<transcript>\n") + transcript + len("\n</transcript>"), omitted
