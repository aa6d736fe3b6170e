"""The seed engine's summarizer transcript: each covered source message rendered as effect-agent's
``renderForSummary`` renders it (recorded content — a cleared result shows its original text —, a
result's JSON clipped at RESULT_CLIP, a message at MESSAGE_CLIP, the middle elided beyond the input
budget), as lengths (``transcript_block``, the summary call's metered input) and as what it shows of
each event (``summary_sees``, the facts a summary can cover). One walk of the parts serves both."""

from __future__ import annotations

from sim.core.types import Trace
from sim.policies.seed_messages import (
    MESSAGE_CLIP,
    RESULT_CLIP,
    block,
    elided_blocks,
    json_units,
    shown_prefix_bytes,
    text_units,
)
from sim.policies.seed_state import SeedState


def transcript_block(trace: Trace, state: SeedState, m: int) -> int | None:
    """The transcript block of source message m (its recorded content: cleared results show it)."""
    return block(state.role[m], [seg for _, seg in transcript_segments(trace, state, m)])


def transcript_segments(trace: Trace, state: SeedState, m: int) -> list[tuple[int, tuple]]:
    """Source message m's parts as the transcript renders them, each with its event (-1: a tool
    call's marker)."""
    info, events = state.info, trace.events
    segments: list[tuple[int, tuple]] = []
    for i in range(state.first[m], state.end[m]):
        e = events[i]
        if e.kind == "tool_result":
            if i in state.rejected:
                n = state.rejected[i]  # an ASCII JSON text
            elif i in state.envelopes:
                n = state.envelopes[i][2]
            else:
                n = json_units(e.content, e.chars, e.bytes, info.jb[i])
            segments.append((i, ("[tool result bash: ", n, RESULT_CLIP, "]")))
        elif e.kind == "user" and i in info.inputs:
            segments.append((i, ("", json_units(e.content, e.chars, e.bytes, info.jb[i]), None, "")))
        else:
            if e.bytes > 0 or e.kind != "assistant":
                segments.append((i, ("", text_units(e.content, e.chars), None, "")))
            if e.kind == "assistant":
                segments += [(-1, ("[tool call bash {}]", 0, None, ""))] * len(e.tool_call_ids)
    return segments


def summary_sees(trace: Trace, state: SeedState, messages: list[int]) -> dict[int, tuple]:
    """What the summarizer's input holds of each covered event: the head of its recorded text (a
    cleared result shows its original content, as effect-agent renders the source messages) that
    the transcript's clips leave — a result's JSON text at RESULT_CLIP, its message at MESSAGE_CLIP
    — as a byte range; an event of a block the input budget elides holds nothing. A result in an
    envelope (or rejected) shows the envelope's text: the loop reads its facts there as the view
    shows them, within this head."""
    events = trace.events
    sees: dict[int, tuple] = {}
    parts = [(m, transcript_segments(trace, state, m)) for m in messages]
    sized = [(block(state.role[m], [g for _, g in segs]), segs) for m, segs in parts]
    shown = [(b, segs) for b, segs in sized if b is not None]  # an empty message makes no block
    start, end = elided_blocks([b for b, _ in shown], state.summary)
    for j, (_, segs) in enumerate(shown):
        if start <= j <= end:
            continue  # elided: the summarizer never sees it
        used = 0
        for i, (pre, n, clip, post) in segs:
            room = MESSAGE_CLIP - used - len(pre)
            if i >= 0:
                e = events[i]
                as_json = bool(clip) or (e.kind == "user" and i in state.info.inputs)
                limit = min(room, clip if clip is not None else room) - (1 if as_json else 0)
                got = shown_prefix_bytes(e.content, e.chars, e.bytes, limit, as_json)
                sees[i] = ((0, got),) if got > 0 else ()
            used += len(pre) + (min(n, clip) if clip is not None else n) + len(post) + 1
    return sees
