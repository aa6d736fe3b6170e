"""effect-agent's prompt messages, sized without building them (the seed engine's arithmetic).

The seed engine estimates a message as ceil(UTF-8 bytes of ``JSON.stringify(message)`` / 4), where the
message is an Effect ``Prompt`` message: its type ids, role, options, parts and JSON escapes all count.
Here each message's serialized size is the fixed framing of its role and parts (measured once from the
same object shapes) plus the JSON-escaped sizes of what varies: texts, tool call ids, tool results.

Also here: the tool-result envelope (``applyToolResultBounds``: head/tail of the encoded result's JSON
text, shrunk until the envelope fits; on the real text, or on a stand-in of the recorded sizes when the
trace has none), and the length of the summarizer's one user message (``renderForSummary``: per-message
clip, whole-transcript budget with middle elision), which the event counts give exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from json.encoder import encode_basestring

import numpy as np

from sim.cost.tokens import json_bytes

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
    text = (_LETTERS * (nbytes // 26 + 1))[:nbytes]
    if not k:
        return text
    # the letters at (j + 1) * nbytes // (k + 1) become newlines, set in the text's bytes at once (not
    # a list of every character)
    chars = np.frombuffer(text.encode(), dtype=np.uint8).copy()
    chars[np.arange(1, k + 1, dtype=np.int64) * nbytes // (k + 1)] = ord("\n")
    return chars.tobytes().decode()


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


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
# The transcript's limits are in characters (JavaScript string lengths: UTF-16 code units), and so is
# its size here: a text's length is known from the text, or from an event's counts without it (its
# characters, and for its JSON text its JSON bytes less the bytes its multi-byte characters add; exact
# unless the text holds characters outside the Basic Multilingual Plane, which count twice in UTF-16).
def units(text: str) -> int:
    """UTF-16 length of a string (JavaScript's ``length``)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def text_units(text: str | None, chars: int) -> int:
    """Length of a message text as the transcript may show it (beyond MESSAGE_CLIP + 1 it never shows)."""
    return chars if text is None else units(text[: MESSAGE_CLIP + 1])


def json_units(text: str | None, chars: int, nbytes: int, json_size: int) -> int:
    """Length of a string's JSON text (a tool result's, as the transcript shows it)."""
    if text is None:
        return json_size - (nbytes - chars)
    return units(encode_basestring(text[: RESULT_CLIP + 1]))  # json.dumps(..., ensure_ascii=False)


Segment = tuple[str, int, int | None, str]  # prefix, a piece's length, the piece's own clip, suffix


def block(role: str, segments: Sequence[Segment]) -> int | None:
    """Length of one transcript block: ``[role]`` and a newline, then the message's part texts joined by
    newlines, clipped at MESSAGE_CLIP (+ "…"). None when the message's text is empty."""
    total = sum(
        len(pre) + (min(n, clip) if clip is not None else n) + len(post) for pre, n, clip, post in segments
    )
    total += max(len(segments) - 1, 0)
    if total == 0:
        return None
    if total > MESSAGE_CLIP:
        total = MESSAGE_CLIP + 1
    return total + len(role) + 3


def elided_blocks(blocks: Sequence[int], previous_summary: int | None) -> tuple[int, int]:
    """The covered blocks the summarizer's input leaves out, [start, end] (start > end: none):
    renderForSummary's middle-out retention — whole blocks from the front up to half the input budget,
    then from the back up to the rest, the middle elided."""
    joiner = 2
    prev = None if previous_summary is None else 19 + previous_summary  # "[Previous summary]\n" + text
    budget = INPUT_BUDGET - (0 if prev is None else prev + joiner) - INSTRUCTION_CHARS - ELISION_RESERVE
    if sum(u + joiner for u in blocks) <= budget:
        return len(blocks), len(blocks) - 1
    head_len = tail_len = 0
    start, end = 0, len(blocks) - 1
    half = budget // 2
    while start <= end and head_len + blocks[start] + joiner <= half:
        head_len += blocks[start] + joiner
        start += 1
    while end >= start and head_len + tail_len + blocks[end] + joiner <= budget:
        tail_len += blocks[end] + joiner
        end -= 1
    return start, end


def prompt_units(blocks: Sequence[int], previous_summary: int | None) -> tuple[int, int]:
    """Length of the summarizer's user message (instruction, ``<transcript>``, the previous summary block
    and the covered blocks, middle-elided to the input budget: ``elided_blocks``), and how many blocks
    were elided."""
    joiner = 2
    prev = None if previous_summary is None else 19 + previous_summary  # "[Previous summary]\n" + text
    start, end = elided_blocks(blocks, previous_summary)
    omitted = max(end - start + 1, 0)
    selected = list(blocks[:start])
    if omitted > 0:
        selected.append(len(f"[… {omitted} messages omitted from summary input …]"))
    selected += list(blocks[end + 1 :])
    lines = ([] if prev is None else [prev]) + selected
    transcript = sum(lines) + joiner * max(len(lines) - 1, 0)
    return INSTRUCTION_CHARS + len("\n\n<transcript>\n") + transcript + len("\n</transcript>"), omitted


def shown_prefix_bytes(text: str | None, chars: int, nbytes: int, limit: int, as_json: bool) -> int:
    """UTF-8 bytes of the longest prefix of a message text the transcript shows within ``limit`` UTF-16
    units: as JSON string content (escaped, quotes not counted) when ``as_json``, else as it is. Without
    the text, in proportion to its characters. What the summarizer's input holds of a clipped text: the
    facts whose byte spans lie inside it are the ones a summary can cover."""
    if limit <= 0 or nbytes <= 0:
        return 0
    if text is None:
        return min(nbytes, nbytes * limit // max(chars, 1))

    def size(piece: str) -> int:
        return units(encode_basestring(piece)) - 2 if as_json else units(piece)

    head = text[:limit]
    if size(head) <= limit:
        return len(head.encode())
    lo, hi = 0, len(head)  # the longest prefix within the limit: escaping only lengthens a text
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if size(head[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return len(head[:lo].encode())
