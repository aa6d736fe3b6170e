// The closed-loop replay of one canonical trace through effect-agent's own context-management code
// (bundled by driver.mjs). Real code, run as is: the message estimator, nextContextEstimate,
// choosePruneBound, chooseSummarizeCut, collectCoveredMessages, buildCompactedView, renderForSummary,
// the tool-result bound (boundEncodedToolResult -> applyToolResultBounds), the initial prompt and the
// assistant message built from response parts (makeInitialPrompt, promptFromTurnParts), the output
// contract, formatRunStatus and nearingLimit.
// Transcribed from index.ts (its control flow is tangled with streams and services): makeTurn's
// pre-turn seam and compactedOutgoing, compactContext's prune -> summarize order, the overflow retry,
// consumeUsage's counters and the budget paths (strict `>`, the rejected batch, the grace turn, the
// breaching final answer, warnings), and the tool message of a settled batch.
// The provider and the model are ctxsim's documented models, so both sides see the same numbers: a
// request weighs the view's items at ctxsim's per-event token sizes (cut and placeholder items by
// ctxsim's calibrated rules) + the call's recorded residual + the status line's calibrated size; the
// model answers with the recorded output tokens, the summarizer with ctxsim's size rule.
import { Effect, Schema } from "effect";
import { Prompt } from "effect/unstable/ai";
import * as C from "effect-agent:compaction";
import type { ContextCompactionState } from "effect-agent:compaction";
import { outputSchemaContract } from "effect-agent:output-contract";
import { ToolResultBounds } from "effect-agent:tool-result";
import * as E from "effect-agent:engine";

// bound: a text-free result's text as ctxsim's bound cuts it (same JSON size as text), else null
type Ev = { kind: string; text: string; bound: string | null; tokens: number; bytes: number; ids: string[]; id: string | null; run: number };
type CallIn = { view_end: number; residual: number; output: number; elapsed: number; ids: string[]; run: number };
type TraceIn = { id: string; bpt: number | null; events: Ev[]; calls: CallIn[] };
type Knobs = {
  context_token_limit: number | null;
  keep_recent_tokens: number;
  mode: "prune" | "summarize" | "prune-then-summarize";
  tool_result_max_bytes: number;
  run_status: "appended" | "off";
  on_exhaustion: "final-answer" | "fail";
  max_turns: number | null;
  max_tool_calls: number | null;
  max_duration_s: number | null;
  token_budget: number | null;
  summary_ratio: number;
  summary_min_tokens: number;
  summary_max_tokens: number;
  persist_compaction: boolean;
};
type Case = { trace: number; setting: string; knobs: Knobs; window: number | null };
type Input = { traces: TraceIn[]; cases: Case[] };

const TOOL_NAME = "bash"; // the canonical trace records no tool names
const utf8 = (s: string) => Buffer.byteLength(s, "utf8");
const pyRound = (x: number) => {
  // Python's round(): half to even (ctxsim's size rules)
  const f = Math.floor(x);
  const d = x - f;
  return d > 0.5 ? f + 1 : d < 0.5 ? f : f % 2 === 0 ? f : f + 1;
};

// The engine requires maxTurns, maxToolCalls and maxDuration; a replay keeps a budget off unless set (a
// recorded run has its own length). Off is Infinity here (no budget path fires), and its segment of the
// status line, which formatRunStatus renders "/Infinity", shows no limit (as ctxsim's line does): the
// engine has no line for a budget it cannot be without, so this is the mapping's, not a decision rule.
const withoutOffBudgets = (line: string) => line.replace("s/Infinitys", "s").replaceAll("/Infinity", "");

const contract = outputSchemaContract({ output: Schema.String } as never);
const OUTPUT_CONTRACT_TOKENS =
  contract._tag === "rendered"
    ? C.estimatePromptTokens([Prompt.makeMessage("system", { content: contract.message })])
    : 0;

function replay(t: TraceIn, c: Case) {
  const k = c.knobs;
  const bpt = t.bpt || 4;
  const estimateTokens = (nbytes: number) => Math.ceil((nbytes + 16) / bpt); // ctxsim's calibrated size
  const scaleTokens = (tokens: number, oldB: number, newB: number) =>
    oldB + 16 <= 0 ? tokens : pyRound((tokens * (newB + 16)) / (oldB + 16));
  const limit = k.context_token_limit ?? undefined;
  const maxTurns = k.max_turns ?? Infinity;
  const maxToolCalls = k.max_tool_calls ?? Infinity;
  const maxDuration = k.max_duration_s ?? Infinity;
  const bounds = ToolResultBounds.make({ maxBytes: k.tool_result_max_bytes });
  const events = t.events;
  // Each Run of the conversation (a trace of several runs: its events' `run`) starts with makeRun's
  // initial prompt: its instructions (the first system event of its block) and its input (the first user
  // event there), the block being the events from the run's first to the first assistant event after
  // it; the current run's block is the protected one (prior runs' blocks are history).
  const runFirst = events.flatMap((e, i) => (i === 0 || e.run !== events[i - 1]!.run ? [i] : []));
  const blocks = (runFirst.length > 0 ? runFirst : [0]).map((start) => {
    const a = events.findIndex((e, i) => i >= start && e.kind === "assistant");
    return [start, a < 0 ? events.length : a] as const;
  });
  const opening = new Map<number, Prompt.Message>(); // a block's system and input event -> its message
  for (const [start, end] of blocks) {
    const inputEvent = events.findIndex((e, i) => i >= start && i < end && e.kind === "user");
    const systemEvent = events.findIndex((e, i) => i >= start && i < end && e.kind === "system");
    const initial = Effect.runSync(
      E.makeInitialPrompt(systemEvent >= 0 ? events[systemEvent]!.text : "", inputEvent >= 0 ? events[inputEvent]!.text : "", Prompt.empty),
    ).content;
    if (systemEvent >= 0) opening.set(systemEvent, initial[0]!);
    if (inputEvent >= 0) opening.set(inputEvent, initial[initial.length - 1]!);
  }
  let block: readonly [number, number] = blocks[0]!;

  let state: ContextCompactionState = C.initialCompactionState();
  const context = {
    compaction: state,
    lastInputTokens: 0,
    lastOutputTokens: 0,
    inputTokens: 0,
    outputTokens: 0,
    tokenExhausted: false,
    exhaustedDimension: undefined as string | undefined,
    warnedLimits: new Set<string>(),
    finalizing: false,
  };
  const source: Prompt.Message[] = [];
  const msgFirst: number[] = [];
  const msgEnd: number[] = [];
  const msgOf: number[] = new Array(events.length).fill(-1);
  const size: number[] = events.map((e) => e.tokens); // ctxsim's size of each item as sent
  let protectedStart = 0; // the current block's messages
  let protectedEnd = 0;
  let summaryMsgTokens = 0;
  let rejecting: { limit: string; encoded: unknown; ids: Set<string> } | undefined;
  const envelopes: unknown[] = [];
  const placeholderTokens = estimateTokens(utf8(C.CLEARED_TOOL_RESULT));
  const protectedMsg = (m: number) => m >= state.protectedStart && m < state.protectedEnd;

  const push = (m: Prompt.Message, first: number, end: number) => {
    source.push(m);
    msgFirst.push(first);
    msgEnd.push(end);
    for (let i = first; i < end; i += 1) msgOf[i] = source.length - 1;
    if (block[0] <= first && first < block[1]) {
      if (protectedEnd <= protectedStart) protectedStart = source.length - 1;
      protectedEnd = source.length;
    }
  };
  const issuer = new Map<string, number>(); // a call id -> the assistant event that issued it (so far)
  let built = 0;
  const admit = (end: number) => {
    const chunk = built;
    let batch: { first: number; parts: Prompt.Part[]; issuer: number } | undefined;
    const flush = () => {
      if (batch) push(Prompt.makeMessage("tool", { content: batch.parts as never }), batch.first, batch.first + batch.parts.length);
      batch = undefined;
    };
    for (let i = chunk; i < end; i += 1) {
      const e = events[i]!;
      if (e.kind === "assistant") for (const id of e.ids) issuer.set(id, i);
      if (e.kind !== "tool_result") flush();
      if (e.kind === "tools") continue;
      if (e.kind === "system") {
        push(opening.get(i) ?? Prompt.makeMessage("system", { content: e.text }), i, i + 1);
      } else if (e.kind === "user") {
        push(opening.get(i) ?? Prompt.make(e.text).content[0]!, i, i + 1);
      } else if (e.kind === "assistant") {
        const parts: unknown[] = e.text.length > 0 ? [{ type: "text", text: e.text }] : [];
        for (const id of e.ids) parts.push({ type: "tool-call", id, name: TOOL_NAME, params: {}, providerExecuted: false });
        const response = E.promptFromTurnParts({ parts } as never).content;
        if (response.length > 0) push(response[0]!, i, i + 1);
      } else {
        // a settled result: bounded at the settle seam, or the synthetic rejection of its batch
        let result: unknown;
        let isFailure = false;
        if (rejecting && e.id !== null && rejecting.ids.has(e.id)) {
          result = rejecting.encoded;
          isFailure = true;
          size[i] = estimateTokens(utf8(JSON.stringify(result)));
        } else {
          const source = e.bound ?? e.text;
          result = E.boundEncodedToolResult(source, bounds);
          if (result === source) result = e.text;
          else {
            const envelopeBytes = utf8(JSON.stringify(result));
            size[i] = scaleTokens(e.tokens, e.bytes, envelopeBytes);
            envelopes.push({ event: i, original_bytes: (result as { originalBytes: number }).originalBytes, envelope_bytes: envelopeBytes });
          }
        }
        const part = Prompt.makePart("tool-result", { id: e.id ?? "", name: TOOL_NAME, result, isFailure, providerExecuted: false });
        const who = e.id !== null ? (issuer.get(e.id) ?? -1) : -1;
        if (batch && who >= 0 && batch.issuer === who && batch.first + batch.parts.length === i) {
          batch.parts.push(part);
        } else {
          flush();
          batch = { first: i, parts: [part], issuer: who };
        }
      }
    }
    flush();
    built = end;
    state.protectedStart = protectedStart;
    state.protectedEnd = protectedEnd;
  };

  const view = () => C.buildCompactedView(source, state);
  const eventAt = (m: number, n: number) => (m < msgFirst.length ? msgFirst[m]! : n);
  const itemSize = (i: number) => {
    const m = msgOf[i]!;
    if (m >= 0 && state.summary !== undefined && state.summarizedThrough > 0 && m < state.summarizedThrough && !protectedMsg(m)) return 0;
    if (m >= 0 && m < state.clearedThrough && source[m]!.role === "tool") return placeholderTokens;
    return size[i]!;
  };
  const viewTokens = (n: number) => {
    let total = 0;
    for (let i = 0; i < n; i += 1) total += itemSize(i);
    return total + (state.summary !== undefined && state.summarizedThrough > 0 ? summaryMsgTokens : 0);
  };

  const consume = (input: number, output: number) => {
    context.inputTokens += input;
    context.outputTokens += output;
    context.lastInputTokens = input;
    context.lastOutputTokens = output;
  };
  const warnings: [number, string][] = [];
  const warnTokens = (turn: number) => {
    const tb = k.token_budget;
    if (tb !== null && !context.warnedLimits.has("tokens") && E.nearingLimit(context.inputTokens + context.outputTokens, tb)) {
      context.warnedLimits.add("tokens");
      warnings.push([turn, "tokens"]);
    }
  };

  // compactContext, transcribed: prune (not when forced or in mode summarize), the full-view check,
  // then summarize through the (stub) summarizer whose usage is consumed like any call's
  const compact = (turn: number, force: boolean, n: number) => {
    const rec: Record<string, unknown> = { before: C.estimatePromptTokens(view()), prune: null, summarize: null };
    if (!force && k.mode !== "summarize") {
      const old = state.clearedThrough;
      const bound = C.choosePruneBound(source, state, k.keep_recent_tokens);
      if (bound > state.clearedThrough) {
        state.clearedThrough = bound;
        state.lastViewLength = -1;
        const after = C.estimatePromptTokens(view());
        const cleared: number[] = [];
        for (let m = old; m < bound; m += 1) {
          if (source[m]!.role === "tool") for (let i = msgFirst[m]!; i < msgEnd[m]!; i += 1) cleared.push(i);
        }
        rec.prune = { from: eventAt(old, n), to: eventAt(bound, n), cleared, after };
        if (limit !== undefined && after <= limit) return rec;
      }
    }
    if (k.mode === "prune" && !force) return rec;
    const cut = C.chooseSummarizeCut(source, state, k.keep_recent_tokens);
    const covered = C.collectCoveredMessages(source, state, cut);
    if (covered.length === 0) return rec;
    const transcript = C.renderForSummary(covered, state.summary);
    const prompt = `${C.COMPACTION_INSTRUCTION}\n\n<transcript>\n${transcript}\n</transcript>`;
    let coveredTokens = summaryMsgTokens;
    const coveredMsgs: number[] = [];
    for (let m = Math.max(0, state.summarizedThrough); m < cut && m < source.length; m += 1) {
      if (protectedMsg(m)) continue;
      coveredMsgs.push(m);
      for (let i = msgFirst[m]!; i < msgEnd[m]!; i += 1) coveredTokens += itemSize(i);
    }
    const promptChars = prompt.length; // the summarizer's metered input: the calibrated size of its length
    const input = estimateTokens(promptChars);
    const out = Math.min(Math.max(pyRound(k.summary_ratio * coveredTokens), k.summary_min_tokens), k.summary_max_tokens);
    context.finalizing = true; // consumeUsage of the summarizer: counted, never a breach
    consume(input, out);
    warnTokens(turn);
    context.finalizing = false;
    const text = "x".repeat(pyRound(out * bpt)).trim();
    state.summary = text.length === 0 ? "(no summary produced)" : text;
    state.summarizedThrough = cut;
    state.lastViewLength = -1;
    summaryMsgTokens = out + estimateTokens(utf8(C.COMPACTION_SUMMARY_PREFIX));
    rec.summarize = {
      cut: eventAt(cut, n),
      covered: [msgFirst[coveredMsgs[0]!], msgEnd[coveredMsgs[coveredMsgs.length - 1]!]],
      prompt_chars: promptChars,
      elided: Number(transcript.match(/\[… (\d+) messages omitted from summary input …\]/)?.[1] ?? 0),
      input_tokens: input,
      output_tokens: out,
      after: C.estimatePromptTokens(view()),
    };
    return rec;
  };

  const calls: Record<string, unknown>[] = [];
  let finish = "completed";
  let priorToolCalls = 0;
  let grace = false;
  // warnings from here on were raised during the grace turn (its compaction's summarizer, its answer):
  // ctxsim reports none (no verdict follows the grace turn), the goldens keep them apart
  let graceWarnings = -1;
  const ncalls = t.calls.length;
  for (let kk = 0; kk < ncalls; kk += 1) {
    const call = t.calls[kk]!;
    const turn = kk + 1;
    if (kk > 0 && call.elapsed >= maxDuration) {
      finish = "budget-exhausted:duration"; // makeTurn: the duration deadline, before anything else
      break;
    }
    if (kk > 0 && !grace && call.run !== t.calls[kk - 1]!.run) {
      // a new Run of the conversation (the grace turn is the final answer of the Run that breached, not
      // the next recorded run's first turn): without the durable compaction record it starts from
      // initialCompactionState over the same history; with it the state carries on. Either way it has no
      // anchor yet (its first estimate is the whole view) and its own block is the protected one.
      if (!k.persist_compaction) {
        state = C.initialCompactionState();
        context.compaction = state;
        summaryMsgTokens = 0;
      }
      state.lastViewLength = -1;
      block = blocks[call.run] ?? [events.length, events.length];
      protectedStart = protectedEnd = source.length;
    }
    admit(call.view_end);
    const n = call.view_end;
    const rec: Record<string, unknown> = { call: kk, grace, triggered: false, prune: null, summarize: null, overflow: null };
    if (grace) graceWarnings = warnings.length;
    // the pre-turn seam
    if (limit !== undefined && !context.finalizing) {
      const v = view();
      const anchored = context.lastInputTokens > 0 && state.lastViewLength >= 0 && state.lastViewLength <= v.length;
      rec.anchored = anchored;
      rec.estimate = E.nextContextEstimate(context as never, v);
      rec.appended = anchored ? C.estimatePromptTokens(v.slice(state.lastViewLength)) : null;
      if ((rec.estimate as number) + OUTPUT_CONTRACT_TOKENS > limit && state.lastCompactionTurn !== turn) {
        state.lastCompactionTurn = turn;
        rec.triggered = true;
        Object.assign(rec, compact(turn, false, n));
      }
    }
    const outgoing = () => {
      state.lastViewLength = view().length; // compactedOutgoing
      let st = 0;
      rec.status = null;
      if (k.run_status === "appended") {
        const line = E.formatRunStatus({
          turn,
          maxTurns: maxTurns,
          toolCallsUsed: priorToolCalls,
          maxToolCalls: maxToolCalls,
          tokensConsumed: context.inputTokens + context.outputTokens,
          tokenBudget: k.token_budget ?? undefined,
          lastInputTokens: context.lastInputTokens,
          elapsedSeconds: Math.max(0, Math.floor(call.elapsed)),
          maxDurationSeconds: Math.floor(maxDuration),
        });
        rec.status = withoutOffBudgets(line);
        st = estimateTokens(utf8(rec.status as string));
      }
      return Math.max(viewTokens(n) + call.residual + st, 0); // ctxsim's provider: a negative residual, 0 at least
    };
    let request = outgoing();
    if (c.window !== null && request > c.window) {
      // RUN-027: one summarize-and-retry per turn when a limit is configured
      if (limit === undefined || state.overflowRetryTurn === turn) {
        finish = "context-overflow";
        calls.push(rec);
        break;
      }
      state.overflowRetryTurn = turn;
      state.lastCompactionTurn = turn;
      rec.overflow = compact(turn, true, n);
      request = outgoing();
      if (request > c.window) {
        finish = "context-overflow";
        calls.push(rec);
        break;
      }
    }
    rec.request = request;
    calls.push(rec);
    const output = grace ? t.calls[ncalls - 1]!.output : call.output;
    const last = kk === ncalls - 1;
    if (grace) {
      consume(request, output); // the grace turn's usage: charged, cannot breach again
      warnTokens(turn);
      break; // the run settles with the grace turn's answer
    }
    const declared = call.ids;
    const toolCalls = priorToolCalls + declared.length;
    const fail = k.on_exhaustion === "fail";
    const overTools = toolCalls > maxToolCalls;
    // every recorded call but the last continues the run (its batch runs before the next turn)
    if (!last && overTools && fail) {
      finish = "budget-exhausted:tool_calls";
      break;
    }
    if (!last && (fail ? turn >= maxTurns : turn > maxTurns)) {
      finish = "budget-exhausted:turns";
      break;
    }
    // consumeUsage
    consume(request, output);
    const consumed = context.inputTokens + context.outputTokens;
    const breach = !context.tokenExhausted && k.token_budget !== null && consumed > k.token_budget;
    if (breach && fail) {
      finish = "budget-exhausted:tokens";
      break;
    }
    if (breach) {
      context.tokenExhausted = true;
      context.exhaustedDimension ??= "tokens";
    }
    warnTokens(turn);
    if (!context.warnedLimits.has("tool-calls") && E.nearingLimit(toolCalls, maxToolCalls)) {
      context.warnedLimits.add("tool-calls");
      warnings.push([turn, "tool_calls"]);
    }
    if (!context.warnedLimits.has("turns") && E.nearingLimit(turn, maxTurns)) {
      context.warnedLimits.add("turns");
      warnings.push([turn, "turns"]);
    }
    if (last) {
      if (breach) finish = "budget-exhausted:tokens"; // the breaching answer exists: the run completes
      break;
    }
    priorToolCalls = toolCalls;
    if (breach || overTools) {
      const name = breach ? "tokens" : "tool-calls";
      const value = breach ? k.token_budget : k.max_tool_calls;
      const message = E.REJECTION_TEMPLATES[name].replace(/\$\{[^}]*\}/, String(value));
      rejecting = { limit: name, encoded: { _tag: "AgentPolicyError", limit: name, message }, ids: new Set(declared) };
    }
    const next = t.calls[kk + 1]!;
    if (next.elapsed >= maxDuration) {
      finish = "budget-exhausted:duration";
      break;
    }
    // finalAnswerOnly at the next turn: its dimension is the first cause
    if (turn + 1 > maxTurns || toolCalls > maxToolCalls || context.tokenExhausted) {
      context.exhaustedDimension ??= turn + 1 > maxTurns ? "turns" : toolCalls > maxToolCalls ? "tool_calls" : "tokens";
      finish = `budget-exhausted:${context.exhaustedDimension}`;
      grace = true;
    }
  }
  const agentWarnings = graceWarnings < 0 ? warnings : warnings.slice(0, graceWarnings);
  const ofGrace = graceWarnings < 0 ? [] : warnings.slice(graceWarnings);
  return { trace: t.id, setting: c.setting, calls, envelopes, finish, warnings: agentWarnings, grace_warnings: ofGrace };
}

export function run(input: Input & { status_views: Parameters<typeof E.formatRunStatus>[0][] }) {
  return {
    source_commit: E.SOURCE_COMMIT,
    output_contract_tokens: OUTPUT_CONTRACT_TOKENS,
    results: input.cases.map((c) => replay(input.traces[c.trace]!, c)),
    status: input.status_views.map((v) => E.formatRunStatus(v)),
  };
}
