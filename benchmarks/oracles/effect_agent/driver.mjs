// Differential oracle for ctxsim's seed_engine: bundles effect-agent's own modules with oracle.ts and
// runs it. Usage: node driver.mjs IN.json OUT.json
//
// The effect-agent sources are read where they are (../shared/reference/effect-agent relative to the
// ctxsim repository root; see SOURCE below); nothing of them is copied into the repository. compaction.ts, tool-result.ts and output-contract-internal.ts are imported
// whole. index.ts (the engine) imports far more than a bundle can resolve, so the few module-private
// functions the oracle calls are taken out of it by name, each whole top-level declaration as written,
// into a virtual module; the build fails when one is missing.
import { build } from "esbuild";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "../../..");
// EFFECT_AGENT_SRC, else ../shared/reference/effect-agent beside the repository, else next to the
// shared traces ($CTXSIM_TRACES/../reference/effect-agent)
const candidates = [
  process.env.EFFECT_AGENT_SRC,
  join(REPO, "../shared/reference/effect-agent"),
  process.env.CTXSIM_TRACES && join(process.env.CTXSIM_TRACES, "../reference/effect-agent"),
].filter(Boolean);
const SOURCE = resolve(candidates.find((c) => existsSync(join(c, "SOURCE.md"))) ?? candidates[0]);
const FILES = {
  compaction: "packages/engine/src/compaction.ts",
  "tool-result": "packages/core/src/tool-result.ts",
  "output-contract": "packages/engine/src/output-contract-internal.ts",
  index: "packages/engine/src/index.ts",
};
// module-private declarations of index.ts the oracle runs as they are
const TAKEN = [
  "interface RunStatusView",
  "const RUN_STATUS_WARNING",
  "const nearingLimit",
  "const formatRunStatus",
  "const nextContextEstimate",
  "const boundEncodedToolResult",
  "const promptFromTurnParts",
  "const makeInitialPrompt",
];

for (const rel of Object.values(FILES)) {
  if (!existsSync(join(SOURCE, rel))) {
    console.error(`driver: ${join(SOURCE, rel)} not found; set EFFECT_AGENT_SRC to effect-agent's sources`);
    process.exit(2);
  }
}
const commit = (readFileSync(join(SOURCE, "SOURCE.md"), "utf8").match(/\b[0-9a-f]{40}\b/) ?? ["unknown"])[0];

/** The whole top-level declaration starting with `head` (optionally exported): from its line to the
 * line where brackets balance again and the statement ends. */
function declaration(lines, head) {
  const start = lines.findIndex((l) => l.startsWith(head) || l.startsWith(`export ${head}`));
  if (start < 0) throw new Error(`index.ts: no top-level '${head}'`);
  let depth = 0;
  for (let i = start; i < lines.length; i += 1) {
    // brackets inside strings and template literals of these declarations balance on their own
    for (const ch of lines[i]) depth += "{([".includes(ch) ? 1 : "})]".includes(ch) ? -1 : 0;
    const end = lines[i].trimEnd();
    if (depth === 0 && (end.endsWith(";") || (end.endsWith("}") && head.startsWith("interface")))) {
      return lines.slice(start, i + 1).join("\n").replace(/^export /, "");
    }
  }
  throw new Error(`index.ts: '${head}' never ends`);
}

/** The message templates of the two synthetic rejections (tool calls, tokens), as written in index.ts. */
function templates(text) {
  const find = (prefix) => {
    const m = text.match(new RegExp("message: `(" + prefix + "[^`]*)`"));
    if (!m) throw new Error(`index.ts: no rejection message starting '${prefix}'`);
    return m[1];
  };
  return { "tool-calls": find("Tool Call budget exhausted"), tokens: find("Token budget exhausted") };
}

const index = readFileSync(join(SOURCE, FILES.index), "utf8");
const engineModule = [
  `import { Effect, Schema } from "effect";`,
  `import { Prompt } from "effect/unstable/ai";`,
  `import { estimatePromptTokens } from "effect-agent:compaction";`,
  `import { applyToolResultBounds, unserializableToolResult } from "effect-agent:tool-result";`,
  // names the taken code refers to only on its error paths (defined in modules not taken)
  `const AgentInputError = { make: (e) => new Error(e.message) };`,
  `const errorMessage = (cause) => String(cause);`,
  ...TAKEN.map((h) => declaration(index.split("\n"), h)),
  `export { formatRunStatus, nearingLimit, nextContextEstimate, boundEncodedToolResult, promptFromTurnParts, makeInitialPrompt, RUN_STATUS_WARNING };`,
  `export const REJECTION_TEMPLATES = ${JSON.stringify(templates(index))};`,
  `export const SOURCE_COMMIT = ${JSON.stringify(commit)};`,
].join("\n\n");

const effectAgent = {
  name: "effect-agent",
  setup(b) {
    b.onResolve({ filter: /^effect-agent:/ }, (args) => {
      const name = args.path.slice("effect-agent:".length);
      if (name === "engine") return { path: "engine", namespace: "effect-agent-engine" };
      return { path: join(SOURCE, FILES[name]) };
    });
    b.onLoad({ filter: /.*/, namespace: "effect-agent-engine" }, () => ({
      contents: engineModule,
      loader: "ts",
      resolveDir: HERE,
    }));
  },
};

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: node driver.mjs IN.json OUT.json");
  process.exit(2);
}
const work = mkdtempSync(join(tmpdir(), "ctxsim-oracle-"));
try {
  const bundle = join(work, "oracle.mjs");
  await build({
    entryPoints: [join(HERE, "oracle.ts")],
    bundle: true,
    format: "esm",
    platform: "node",
    outfile: bundle,
    nodePaths: [join(HERE, "node_modules")],
    plugins: [effectAgent],
    logLevel: "error",
  });
  const { run } = await import(pathToFileURL(bundle).href);
  writeFileSync(output, JSON.stringify(run(JSON.parse(readFileSync(input, "utf8")))));
} finally {
  rmSync(work, { recursive: true, force: true });
}
