"""Vendor clearing and compaction policies (POLICIES.md §3-4), rule by rule on hand-built traces.

Trace ``six()``: 0 system (100 tokens), 1 task (50), then six turns of assistant ``cmd k`` (10 tokens)
+ tool result (100 tokens): assistants 2, 4, .. 12, results 3, 5, .. 13. Call k sees events [0, 2 + 2k):
raw input 150 + 110 k. Bytes per token 4.0: a new message of b bytes weighs ceil((b + 16) / 4).
"""

import pytest
from builders import swe_trace

from sim.core.records import AGENT, SUMMARY
from sim.core.types import ItemState
from sim.engine.dispatch import replay
from sim.policies.anthropic_clear_tool_uses import text_size
from sim.policies.base import make_policy
from sim.policies.codex_auto_compact import SUMMARY_PREFIX as CODEX_PREFIX
from sim.policies.langchain_summarization import SUMMARY_PROMPT
from sim.util.errors import ConfigError

V, M, D, S, B = (
    ItemState.VERBATIM,
    ItemState.MASKED,
    ItemState.DROPPED,
    ItemState.SUMMARIZED,
    ItemState.BOUNDED,
)


def six():
    return swe_trace([("x" * 384, 100)] * 6)


def run(name, trace=None, **knobs):
    return replay(trace or six(), make_policy(name, **knobs), window=None)


def col(r, c):
    return r.calls[c].tolist()


# ------------------------------------------------------------------------------ Anthropic clearing
def test_anthropic_clearing_persists_and_moves_forward():
    # placeholder "[tool result cleared]" (21 bytes) -> 10 tokens: clearing a result saves 90.
    # call 3: 480 > 400, results 3, 5, 7 in view, keep 2 -> clear 3 -> 390; call 4: 390 + 110 = 500 ->
    # clear 5 -> 410; call 5: 520 -> clear 7 -> 430. Each call rewrites from the newly cleared result only.
    r = run("anthropic_clear_tool_uses", trigger_tokens=400, keep=2)
    assert col(r, "input_tokens") == [150, 260, 370, 390, 410, 430]
    assert col(r, "first_changed") == [-1, -1, -1, 3, 5, 7]
    assert col(r, "items_changed") == [0, 0, 0, 1, 1, 1]
    assert [r.item_state[i] for i in (3, 5, 7, 9, 11)] == [M, M, M, V, V]
    assert r.item_tokens[3] == 10


def test_anthropic_clear_at_least_skips_small_activations():
    # clear_at_least 150: call 3 could reclaim only 90 (result 3) -> skipped; call 4 reclaims 180
    # (results 3 and 5) -> applied; call 5 would add only result 7 (90) -> skipped, earlier clears stay.
    r = run("anthropic_clear_tool_uses", trigger_tokens=400, keep=2, clear_at_least=150)
    assert col(r, "input_tokens") == [150, 260, 370, 480, 410, 520]
    assert col(r, "first_changed") == [-1, -1, -1, -1, 3, -1]
    assert [r.item_state[i] for i in (3, 5, 7)] == [M, M, V]


def test_anthropic_clear_tool_inputs_and_exclude_tools():
    # keep 1; "cmd 1" (assistant 4) is excluded by name, so result 5 stays. Inputs: "[tool input
    # cleared]" (20 bytes) -> 9 tokens, saving 1 on a 10-token assistant.
    # call 3: clear 3 + its call 2 -> 480 - 90 - 1 = 389; call 4: 499 -> clear 7 + call 6 -> 408.
    r = run(
        "anthropic_clear_tool_uses",
        trigger_tokens=400,
        keep=1,
        clear_tool_inputs=True,
        exclude_tools=["cmd 1"],
    )
    assert col(r, "input_tokens") == [150, 260, 370, 389, 408, 427]
    assert col(r, "first_changed") == [-1, -1, -1, 2, 6, 8]
    assert [r.item_state[i] for i in (2, 3, 4, 5, 6, 7)] == [M, M, V, V, M, M]
    assert r.item_tokens[2] == 9


# ------------------------------------------------------------------------------ LangChain clearing
def test_langchain_clearing_recleared_every_call():
    # placeholder "[cleared]" (9 bytes) -> 7 tokens, saving 93. The trigger counts the unedited state,
    # here the whole request (token_count_method model, the model's count with the system message):
    # call 3: 480 > 400 -> clear 3 -> 387; call 4 (unedited 590): re-clear 3, clear 5 -> 404; call 5: 421.
    # Every call re-issues all clears: the cache is rewritten from result 3 on each time.
    r = run("langchain_clear_tool_uses", trigger=400, keep=2, token_count_method="model")
    assert col(r, "input_tokens") == [150, 260, 370, 387, 404, 421]
    assert col(r, "first_changed") == [-1, -1, -1, 3, 3, 3]
    assert col(r, "items_changed") == [0, 0, 0, 1, 2, 3]
    assert r.item_tokens[3] == 7 and [r.item_state[i] for i in (3, 5, 7, 9)] == [M, M, M, V]
    # LangChain's default counts the messages only (no system message: 100 fewer)
    f = run("langchain_clear_tool_uses", trigger=300, keep=2)
    assert col(f, "input_tokens") == col(r, "input_tokens")
    assert col(run("langchain_clear_tool_uses", trigger=400, keep=2), "input_tokens")[3] == 480


def test_langchain_clear_at_least_stops_early():
    # keep 1, clear_at_least 150: clear 3 (93), then 5 (186 >= 150) and stop, every call, although
    # the request (404 at call 4) is over the trigger again: the trigger sees the unedited 590.
    r = run("langchain_clear_tool_uses", trigger=400, keep=1, clear_at_least=150, token_count_method="model")
    assert col(r, "input_tokens") == [150, 260, 370, 294, 404, 514]
    assert col(r, "first_changed") == [-1, -1, -1, 3, 3, 3]
    assert [r.item_state[i] for i in (3, 5, 7, 9)] == [M, M, V, V]


# ------------------------------------------------------------------------ Anthropic server compaction
def test_anthropic_server_compaction_drops_everything_before_the_block():
    # results of 20,000 tokens: call 3 sees 60,180 > 50,000 -> one summary call over the whole request,
    # 2,048 tokens out (0.1 x 60,080 capped); the block ("<compaction>\n" -> 8 tokens) takes slot 1,
    # every message before it weighs 0: 100 + 2,056 = 2,156. Calls 4, 5 grow from there (no trigger).
    t = swe_trace([("x" * 384, 20000)] * 6)
    r = run("anthropic_server_compaction", t, trigger_tokens=50000)
    assert col(r, "kind") == [AGENT] * 3 + [SUMMARY] + [AGENT] * 3
    assert col(r, "input_tokens") == [150, 20160, 40170, 60180, 2156, 22166, 42176]
    assert col(r, "output_tokens")[3] == 2048
    assert col(r, "first_changed")[4] == 1
    assert r.item_state.tolist() == [V] + [S] * 7 + [V] * 4
    assert r.item_tokens[1] == 2056


def test_anthropic_server_compaction_minimum_trigger():
    with pytest.raises(ConfigError, match=r"trigger_tokens=49999 is not an integer >= 50000"):
        make_policy("anthropic_server_compaction", trigger_tokens=49999)


# ----------------------------------------------------------------------------------- Codex
def test_codex_keeps_initial_context_recent_user_messages_and_a_summary():
    t = six()
    prefix, _ = text_size(t, CODEX_PREFIX)
    assert prefix == 104
    # limit 90% of 500 = 450. Call 3 (480): the task (50) is cut to the 30-token user budget (BOUNDED);
    # events 2..7 (330 tokens) -> summary of 33 (+104 prefix) in slot 2; request 100 + 30 + 137 = 267.
    # Call 5 (487): the previous summary (137) + events 8..11 (220) -> 36 out; request 270.
    r = run("codex_auto_compact", t, context_window=500, user_message_max_tokens=30, summary_min_tokens=20)
    assert col(r, "kind") == [0, 0, 0, SUMMARY, 0, 0, SUMMARY, 0]
    assert col(r, "input_tokens") == [150, 260, 370, 480 + 110, 267, 377, 487 + 110, 270]
    assert col(r, "output_tokens")[3] == 33 and col(r, "output_tokens")[6] == 36
    assert r.item_state.tolist() == [V, B] + [S] * 10
    assert r.item_tokens[:3].tolist() == [100, 30, 140]
    assert make_policy("codex_auto_compact").limit == 244800


# ----------------------------------------------------------------------------------- Claude Code
def test_claude_code_keeps_recent_files_and_summarizes_the_rest():
    # threshold 600 - min(50, 20000) - 100 = 450; defaults give 200000 - 20000 - 13000 = 167000.
    # Call 3 (480): the 2 newest results (5, 7; 100 <= 100 tokens) are restored; 1, 2, 3, 4, 6 (180)
    # -> 20-token summary + 35 prefix in slot 1: 100 + 55 + 200 = 355. Small settings thrash: call 4
    # is at 465 again, and so on.
    assert make_policy("claude_code_auto_compact").threshold == 167000
    r = run(
        "claude_code_auto_compact",
        context_window=600,
        max_output_tokens=50,
        buffer_tokens=100,
        restore_files=2,
        restore_file_max_tokens=100,
        summary_min_tokens=20,
    )
    assert col(r, "input_tokens") == [150, 260, 370, 570, 355, 555, 355, 555, 355]
    assert col(r, "kind") == [0, 0, 0, SUMMARY, 0, SUMMARY, 0, SUMMARY, 0]
    assert col(r, "first_changed")[4] == 1
    assert r.item_state.tolist() == [V] + [S] * 8 + [V, S, V]


# --------------------------------------------------------------------------- LangChain summarization
FALLBACK = (
    "Here is a summary of the conversation to date:\n\nPrevious conversation was too long to summarize."
)


def test_langchain_summarization_falls_back_when_trim_leaves_no_human_message():
    # trigger 350 counts the state's messages (no system message). Call 3 (380, messages 1..7): keep 3,
    # cutoff 4 lands on result 5 -> moved back to its call 4: span 1, 2, 3. trim 100: result 3 fits, call
    # 2 crosses (its one line does not fit); start_on="human" then drops result 3: nothing left. No
    # summarizer call: the fixed text (96 bytes -> 28 tokens) in the task's slot, 2 and 3 DROPPED.
    # Call 4 (28 + 330): span = the summary, 4, 5; again nothing human within 100 tokens.
    r = run("langchain_summarization", trigger=350, keep=3, trim_tokens_to_summarize=100)
    fallback = text_size(six(), FALLBACK)[0]
    assert fallback == 28
    assert col(r, "kind") == [AGENT] * 6
    assert col(r, "input_tokens") == [150, 260, 370, 100 + 28 + 220, 348, 348]
    assert r.item_state.tolist() == [V, S] + [D] * 6 + [V] * 4
    assert r.item_tokens[1] == 28


def test_langchain_summarization_cuts_the_crossing_message():
    # trim 150: result 3 (100) and call 2 (10) fit; the task (50 tokens, "task\nline2": lines of 5 + 5
    # bytes) crosses: its last line weighs round(50 x 21 / 26) = 40 and fits (150). The summarizer gets
    # 150 tokens: summary clamp(15, 20) = 20 + 16 (prefix) in the task's slot; input 150 + the prompt.
    # Call 4 (36 + 330): the summary (human) and 4, 5 fit whole (146): summarized again.
    r = run(
        "langchain_summarization", trigger=350, keep=3, trim_tokens_to_summarize=150, summary_min_tokens=20
    )
    prompt = text_size(six(), SUMMARY_PROMPT)[0]
    assert col(r, "kind") == [AGENT] * 3 + [SUMMARY, AGENT] * 3
    assert col(r, "input_tokens") == [150, 260, 370, prompt + 150, 356, prompt + 146, 356, prompt + 146, 356]
    assert r.item_state.tolist() == [V] + [S] * 7 + [V] * 4
    assert r.item_tokens[:8].tolist() == [100, 36, 0, 0, 0, 0, 0, 0]


def test_langchain_summarization_provider_count_reads_the_reported_usage():
    # system message 300: the newest response reports its request + 7 output tokens, 247 + 110 k at call
    # k, more than the state's messages (50 + 110 k). Trigger 400: the messages reach it at call 4, the
    # reported usage at call 2 (467).
    t = swe_trace([("x" * 384, 100)] * 6, system=300)
    kinds = [col(run("langchain_summarization", t, trigger=400, keep=3, token_count=c), "kind")
             for c in ("framework", "provider")]  # fmt: skip
    assert kinds[0].index(SUMMARY) == 4 and kinds[1].index(SUMMARY) == 2


def test_langchain_summarization_takes_plain_integers_and_langchain_pairs():
    a = run("langchain_summarization", trigger=350, keep=3, trim_tokens_to_summarize=150)
    b = run(
        "langchain_summarization", trigger=["tokens", 350], keep=["messages", 3], trim_tokens_to_summarize=150
    )
    assert col(a, "input_tokens") == col(b, "input_tokens")
    for bad, msg in (
        (["turns", 3], "is not an integer or a pair"),
        (["tokens", 0], "tokens must be an integer"),
    ):
        with pytest.raises(ConfigError, match=msg):
            make_policy("langchain_summarization", trigger=bad)


def test_langchain_summarization_off_by_default():
    r = run("langchain_summarization")
    assert col(r, "input_tokens") == [150, 260, 370, 480, 590, 700]


def test_knob_validation_names_knob_value_and_range():
    with pytest.raises(ConfigError, match=r"keep=-1 is not an integer >= 0"):
        make_policy("anthropic_clear_tool_uses", keep=-1)
    with pytest.raises(ConfigError, match=r"exclude_tools='grep' is not null or a list"):
        make_policy("langchain_clear_tool_uses", exclude_tools="grep")
    with pytest.raises(ConfigError, match=r"summary_ratio=0 is not a number in \(0, 1\]"):
        make_policy("codex_auto_compact", summary_ratio=0)
    with pytest.raises(ConfigError, match=r"context_window=33000 leaves a threshold of 0"):
        make_policy("claude_code_auto_compact", context_window=33000)
    with pytest.raises(ConfigError, match=r"trim_tokens_to_summarize=0 is not an integer >= 1"):
        make_policy("langchain_summarization", trim_tokens_to_summarize=0)
