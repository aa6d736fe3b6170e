"""The seed engine's settled items and messages of a text-free trace (``Admitted``, what
``sim.engine.fast.seed_static.GridStatic`` reads), from its arrays and tool links in a few array
operations instead of ``SeedEngine.start``/``settle``/``admit``/``transcript_block`` event by event.

Why it can: where no event holds text or recorded JSON sizes, every size the policy reads follows from an
event's counts: its JSON text is its stand-in's (``bytes`` + 2 + one byte per escaped newline), a result
over the bound is cut from the stand-in, whose quotes and backslashes are all the envelope escapes
(``stand_in_envelope``: ``SeedEngine``'s ``envelope_of`` by arithmetic), a message's estimate is its
framing plus its parts, and a transcript block is its parts' lengths. The rules below are
``SeedEngine.admit``'s and ``seed_transcript.transcript_block``'s, read for every event at once; a
test holds every table equal to the policy's on every trace it takes."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np

from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.tokens import scale_tokens
from sim.policies.seed_engine import SeedEngine
from sim.policies.seed_messages import (
    CALL_PART,
    CLEARED_RESULT_JSON,
    MESSAGE,
    MESSAGE_CLIP,
    RESULT_CLIP,
    RESULT_PART,
    TEXT_PART,
)
from sim.trace.column_links import tool_links

SYSTEM, TOOLS, USER = KIND_CODE["system"], KIND_CODE["tools"], KIND_CODE["user"]
ASSISTANT, RESULT = KIND_CODE["assistant"], KIND_CODE["tool_result"]
RESULT_PRE, RESULT_POST = len("[tool result bash: "), len("]")  # seed_transcript's result segment
CALL_MARK = len("[tool call bash {}]")  # ... and a tool call's marker
_BOUNDED = int(ItemState.BOUNDED)


class Admitted:
    """What the seed engine's start, settle and admission give a trace's tables (``GridStatic``): the
    settled items, per call the messages and appended estimates, per message its role, estimates, events
    and transcript block, and per call its tool calls and time."""

    __slots__ = (
        "settled", "cuts", "tok", "states", "msgs_at", "tools_at", "appended", "role_tool", "est",
        "est_cleared", "first", "end", "protected_end", "tm", "blocks", "tool_calls", "elapsed",
    )  # fmt: skip


def _text_free(trace: Trace) -> bool:
    return all(e.content is None and e.json_bytes is None and e.json2_bytes is None for e in trace.events)


def takes_counts(trace: Trace, proto) -> bool:
    """Whether ``from_counts`` gives ``trace``'s tables under ``proto``: the seed engine itself, one
    run, calls, and no event holding text (a trace read as columns knows it without its events)."""
    return (
        type(proto) is SeedEngine
        and len(trace.arrays.view_end) > 0
        and trace.runs == 1
        and bool(trace.derived("text_free", _text_free))
    )


def _estimate(nbytes: np.ndarray) -> np.ndarray:
    return -(-nbytes // 4)  # seed_messages.estimate


class _Counts:
    """A text-free trace's events in view by its last call, as the policy sizes them."""

    def __init__(self, trace: Trace) -> None:
        a = trace.arrays
        links = trace.derived("tool_links", tool_links)
        self.view_end = a.view_end.astype(np.int64)
        self.N = N = int(self.view_end[-1])
        self.kind = a.kind[:N].astype(np.int64)
        self.nbytes, self.chars = a.bytes[:N].astype(np.int64), a.chars[:N].astype(np.int64)
        self.escapes = np.minimum(np.maximum(a.lines[:N].astype(np.int64) - 1, 0), self.nbytes // 2)
        self.jb = self.nbytes + 2 + self.escapes  # SeedEvents.jb of a text-free event
        self.ids_n, self.ids_json, self.issuer = links.ids_n[:N], links.ids_json[:N], links.issuer[:N]
        self.call_ids = links.call_ids
        # the instruction/input block: the events before the first assistant event (of all of them)
        first_assistant = np.flatnonzero(a.kind == ASSISTANT)
        self.block_end = int(first_assistant[0]) if len(first_assistant) else len(a.kind)
        users = np.flatnonzero(a.kind[: self.block_end] == USER)
        self.input = int(users[0]) if len(users) and users[0] < N else None  # its first user event


class _Batch:
    """Text-free traces' ``_Counts`` laid end to end: event offsets ``eo``, call offsets ``co``, each
    call's view end as a row of the batch (``gve``: non-decreasing), each event's trace (``owner``)."""

    def __init__(self, counts: list[_Counts]) -> None:
        self.counts = counts
        n_ev = np.array([c.N for c in counts], dtype=np.int64)
        n_calls = np.array([len(c.view_end) for c in counts], dtype=np.int64)
        self.eo = np.concatenate([[0], np.cumsum(n_ev)])
        self.co = np.concatenate([[0], np.cumsum(n_calls)])
        self.owner = np.repeat(np.arange(len(counts)), n_ev)
        self.call_owner = np.repeat(np.arange(len(counts)), n_calls)

        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(c, name) for c in counts]) if counts else np.zeros(0, np.int64)

        self.kind, self.nbytes, self.chars, self.escapes = (
            cat("kind"),
            cat("nbytes"),
            cat("chars"),
            cat("escapes"),
        )
        self.jb, self.ids_n, self.ids_json, self.issuer = (
            cat("jb"),
            cat("ids_n"),
            cat("ids_json"),
            cat("issuer"),
        )
        self.gve = cat("view_end") + self.eo[self.call_owner]
        self.block_end = np.array([c.block_end for c in counts], dtype=np.int64) + self.eo[:-1]
        self.inputs = np.array([c.input + self.eo[t] for t, c in enumerate(counts) if c.input is not None])
        self.inputs = self.inputs.astype(np.int64)
        self.N = int(self.eo[-1])


def from_counts(trace: Trace, proto: SeedEngine) -> Admitted:
    """``Admitted`` of a text-free trace of one run (``takes_counts``), as the policy admits it."""
    return from_counts_many([trace], proto)[0]


def from_counts_many(traces: Sequence[Trace], proto: SeedEngine) -> list[Admitted]:
    """``from_counts`` of every trace (each ``takes_counts``), the arithmetic done once for the batch."""
    b = _Batch([_Counts(t) for t in traces])
    out = [Admitted() for _ in traces]
    tok = (
        np.concatenate([t.arrays.tokens[: c.N] for t, c in zip(traces, b.counts, strict=True)])
        if traces
        else None
    )
    result_json, shown, tok, states = _settle(b, tok, proto, out)
    text = b.jb.copy()  # a user or system message's text's JSON bytes
    # each input's text is JSON-stringified twice: json2_bytes of its stand-in (letters and newlines),
    # quoted with each newline as \\n, then quoted again with each backslash and quote escaped
    text[b.inputs] = b.nbytes[b.inputs] + 2 * b.escapes[b.inputs] + 6
    _messages(b, result_json, shown, text, out)
    for t, (trace, c, m) in enumerate(zip(traces, b.counts, out, strict=True)):
        e0, e1 = int(b.eo[t]), int(b.eo[t + 1])
        m.tok, m.states = tok[e0:e1], states[e0:e1]
        m.tool_calls = c.call_ids.tolist()
        m.elapsed = trace.derived("elapsed", _elapsed).tolist()
    return out


def _settle(b: _Batch, tok: np.ndarray, proto: SeedEngine, out: list[Admitted]):
    """Each result over the bound into its envelope (nothing is rejected without budgets): each trace's
    settled items; per event its tokens, state, JSON bytes in a tool message and transcript length."""
    tok = tok.astype(np.int64)
    states = np.zeros(b.N, dtype=np.int8)
    result_json, shown = b.jb.copy(), b.jb - (b.nbytes - b.chars)  # json_units of a text-free text
    for m in out:
        m.settled, m.cuts = [], []
    over = np.flatnonzero((b.kind == RESULT) & (b.jb > proto.tool_result_max_bytes))
    owners = b.owner[over]
    calls_of = (np.searchsorted(b.gve, over, side="right") - b.co[owners]).tolist()  # the call admitting it
    local = (over - b.eo[owners]).tolist()
    for g, t, i, call in zip(over.tolist(), owners.tolist(), local, calls_of, strict=True):
        nbytes = int(b.nbytes[g])
        size, units, kept = stand_in_envelope(nbytes, int(b.escapes[g]), proto.tool_result_max_bytes)
        after = scale_tokens(int(tok[g]), nbytes, size)
        out[t].settled.append((call, i, int(tok[g]), after))
        out[t].cuts.append((call, i, tuple(kept)))
        tok[g], states[g] = after, _BOUNDED
        result_json[g], shown[g] = size, units
    return result_json, shown, tok, states


def _messages(b: _Batch, result_json: np.ndarray, shown: np.ndarray, text: np.ndarray, out: list[Admitted]):
    """``SeedEngine.admit``'s messages of every trace (their events, estimates, protection and per-call
    counts) and each one's transcript block."""
    N, kind, ids_n, issuer = b.N, b.kind, b.ids_n, b.issuer
    # which events make a message, and which results join the tool message before them (one message per
    # batch of results of one assistant turn, within one call's admission)
    idx = np.arange(N)
    k = np.searchsorted(b.gve, idx, side="right")  # the call admitting each event (a row of the batch)
    first_call = k == b.co[b.owner]
    chunk = np.where(first_call, b.eo[b.owner], b.gve[np.maximum(k - 1, 0)])
    result, assistant = kind == RESULT, kind == ASSISTANT
    prev_result = np.zeros(N, dtype=bool)
    prev_result[1:] = result[:-1]
    prev_issuer = np.full(N, -2, dtype=np.int64)
    prev_issuer[1:] = issuer[:-1]
    joins = result & (idx > chunk) & prev_result & (issuer >= 0) & (prev_issuer == issuer)
    text_part = b.nbytes > 0
    makes = (kind != TOOLS) & ~joins & ~(assistant & ~text_part & (ids_n == 0))
    starts = np.flatnonzero(makes)
    M = len(starts)
    msg_of = np.cumsum(makes) - 1  # each event's message (a joining result: its tool message's)
    members = np.flatnonzero(makes | joins)

    def per_message(v: np.ndarray) -> np.ndarray:
        return np.bincount(msg_of[members], weights=v[members], minlength=M).astype(np.int64)

    # per event: its part in its message's content array (results: also as cleared), its transcript
    # segments' length and count
    part = np.where(result, RESULT_PART + b.ids_json + result_json, 0)
    cleared = np.where(result, RESULT_PART + b.ids_json + CLEARED_RESULT_JSON, 0)
    seg_len = np.where(result, RESULT_PRE + np.minimum(shown, RESULT_CLIP) + RESULT_POST, b.chars)
    seg_n = np.ones(N, dtype=np.int64)
    seg_len[assistant] = np.where(text_part, b.chars, 0)[assistant] + CALL_MARK * ids_n[assistant]
    seg_n[assistant] = text_part[assistant].astype(np.int64) + ids_n[assistant]
    seg_len[b.inputs] = shown[b.inputs]  # an input's JSON text
    parts_n = per_message(np.ones(N, dtype=np.int64))
    role = kind[starts]
    is_tool, is_assistant = role == RESULT, role == ASSISTANT
    frame = np.select(
        [role == SYSTEM, role == USER, is_assistant, is_tool],
        [MESSAGE["system"], MESSAGE["user"], MESSAGE["assistant"], MESSAGE["tool"]],
    )
    s_text, s_ids_n, s_text_part = text[starts], ids_n[starts], text_part[starts]
    assistant_parts = np.where(s_text_part, TEXT_PART + s_text, 0) + CALL_PART * s_ids_n + b.ids_json[starts]
    n_parts = np.where(is_assistant, s_text_part + s_ids_n, parts_n)
    body = np.select(  # each message's content: parts_bytes of its parts
        [role == SYSTEM, role == USER, is_assistant],
        [s_text, 2 + TEXT_PART + s_text, 2 + assistant_parts + np.maximum(n_parts - 1, 0)],
        default=2 + per_message(part) + np.maximum(parts_n - 1, 0),
    )
    est = _estimate(frame + body)
    est_cleared = np.where(
        is_tool, _estimate(frame + 2 + per_message(cleared) + np.maximum(parts_n - 1, 0)), est
    )
    # transcript blocks: [role] and a newline, the segments joined by newlines, clipped (None: empty)
    total = per_message(seg_len) + np.maximum(per_message(seg_n) - 1, 0)
    blocks = np.where(total > MESSAGE_CLIP, MESSAGE_CLIP + 1, total) + _ROLE_LEN[role] + 3
    blocks_l = [None if t == 0 else x for t, x in zip(total.tolist(), blocks.tolist(), strict=True)]
    # protection: messages of their trace's block's events; the others' tool messages are prunable
    msg_owner = b.owner[starts]
    protected = starts < b.block_end[msg_owner]
    prunable = is_tool & ~protected
    last_event = np.full(M, -1, dtype=np.int64)
    np.maximum.at(last_event, msg_of[members], members)
    # per trace: its messages [mo[t], mo[t + 1]); per call: messages made by events before its view end
    mo = np.searchsorted(starts, b.eo)
    made_by = np.searchsorted(starts, b.gve, side="left")
    tools_before = np.concatenate([[0], np.cumsum(prunable)])
    est_before = np.concatenate([[0], np.cumsum(est)])
    protected_at = np.flatnonzero(protected)
    last_protected = np.searchsorted(protected_at, mo[1:]) - 1  # per trace: its last protected message
    first_local = (starts - b.eo[msg_owner]).tolist()
    end_local = (last_event + 1 - b.eo[msg_owner]).tolist()
    for t, m in enumerate(out):
        m0, m1, c0, c1 = int(mo[t]), int(mo[t + 1]), int(b.co[t]), int(b.co[t + 1])
        at = made_by[c0:c1]
        m.msgs_at = (at - m0).tolist()
        m.tools_at = (tools_before[at] - tools_before[m0]).tolist()
        m.appended = np.diff(np.concatenate([[est_before[m0]], est_before[at]])).tolist()
        p = int(last_protected[t])
        m.protected_end = int(protected_at[p]) - m0 + 1 if p >= 0 and protected_at[p] >= m0 else 0
        m.tm = (np.flatnonzero(prunable[m0:m1])).tolist()
        m.role_tool, m.est, m.est_cleared = is_tool[m0:m1], est[m0:m1], est_cleared[m0:m1]
        m.first, m.end, m.blocks = first_local[m0:m1], end_local[m0:m1], blocks_l[m0:m1]


# per kind code: the length of its role's name (a message's role is its first event's kind)
_ROLE_LEN = np.array(
    [{"system": 6, "user": 4, "assistant": 9, "tool_result": 4}.get(k, 0) for k in KIND_CODE]
)


def _elapsed(trace: Trace) -> np.ndarray:
    from sim.engine.fast.batch_static import elapsed_array

    return elapsed_array(trace)


def stand_in_envelope(nbytes: int, escapes: int, max_bytes: int) -> tuple[int, int, tuple]:
    """``envelope_of(stand_in(nbytes, escapes), max_bytes)`` by arithmetic, for a result over the bound.

    The stand-in is ASCII letters with ``k`` newlines at (j + 1) * nbytes // (k + 1); its JSON text is a
    quote, the letters with each newline as backslash-n, and a quote. ``bound_result``'s envelope holds a
    head and a tail of that text, where only the quotes and backslashes escape again (a byte more each):
    its size at each step of the shrinking loop is counted from where those lie, the loop itself run as
    ``bound_result`` runs it. What the envelope shows of the stand-in (``_shown``) is then the characters
    whose JSON escapes fit the head and the tail."""
    k = min(max(escapes, 0), nbytes // 2)
    nl = np.arange(1, k + 1, dtype=np.int64) * nbytes // (k + 1)  # the stand-in's newlines
    L = nbytes + k + 2  # bytes of its JSON text
    special = np.concatenate([[0], 1 + nl + np.arange(k), [L - 1]])  # quotes and backslashes there

    def before(x: int) -> int:  # specials before byte x of the JSON text
        return int(np.searchsorted(special, x))

    minimal = len(
        json.dumps(
            {"truncatedToolResult": True, "originalBytes": L, "head": "", "tail": ""},
            ensure_ascii=False,
            separators=(",", ":"),
        )
    )

    def size(hb: int, tb: int) -> int:
        h, t = min(hb, L), max(L - tb, 0)  # _prefix_within, _suffix_within of ASCII
        return minimal + h + (L - t) + before(h) + len(special) - before(t)

    budget = max_bytes - minimal
    hb = tb = 0
    if budget > 0:
        hb, tb = budget // 2, budget - budget // 2
        while True:
            s = size(hb, tb)
            if s <= max_bytes:
                break
            if hb == 0 and tb == 0:
                break  # the minimal envelope
            shrink = max(1, math.ceil((s - max_bytes) / 2))
            hb, tb = max(0, hb - shrink), max(0, tb - shrink)
    head, tail = min(hb, L), L - max(L - tb, 0)
    total = minimal + head + tail + before(head) + len(special) - before(L - tail)
    # the stand-in's characters whose escapes fit (1 + spent <= head): each newline spends two bytes
    back = nbytes - 1 - nl[::-1]
    shown_h, shown_t = _fitting(nl, head - 1, nbytes), _fitting(back, tail - 1, nbytes)
    ranges = ((0, min(shown_h, nbytes)), (max(nbytes - shown_t, 0), nbytes))
    return total, min(total, RESULT_CLIP + 1), tuple(r for r in ranges if r[1] > r[0])


def _fitting(newlines: np.ndarray, room: int, n: int) -> int:
    """The most leading characters (of ``n``, newlines at the sorted ``newlines``) whose JSON escapes
    (a byte each, two for a newline) fit ``room`` bytes."""
    lo, hi = 0, min(max(room, 0), n)  # c characters spend c + (newlines among them) >= c
    while lo < hi:
        c = (lo + hi + 1) // 2
        if c + int(np.searchsorted(newlines, c)) <= room:
            lo = c
        else:
            hi = c - 1
    return lo
