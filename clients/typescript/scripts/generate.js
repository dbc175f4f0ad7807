// `npm run generate`: types/ from their sources — schema.d.ts from the repository's openapi.json
// (openapi-typescript), the declarations of src/ from its JSDoc (tsc). `--check` generates them
// afresh in a temporary directory and fails if the committed ones differ: openapi.json is the one
// source of the client's types, and a change to it (or to src/) is regenerated with one command.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const committed = join(root, "types");
const openapi = join(root, "..", "..", "openapi.json");

/**
 * @param {string} tool a binary of node_modules/.bin
 * @param {string[]} args
 */
function run(tool, args) {
  const done = spawnSync(join(root, "node_modules", ".bin", tool), args, { cwd: root, stdio: "inherit" });
  if (done.status !== 0) process.exit(done.status ?? 1);
}

/** @param {string} out */
function generate(out) {
  // Fields with a default stay optional: a request may leave them out.
  run("openapi-typescript", [openapi, "--default-non-nullable", "false", "--output", join(out, "schema.d.ts")]);
  run("tsc", ["-p", "tsconfig.types.json", "--outDir", out]);
}

if (!process.argv.includes("--check")) {
  generate(committed);
} else {
  const fresh = mkdtempSync(join(tmpdir(), "scheduler-client-types-"));
  try {
    generate(fresh);
    const names = new Set([...readdirSync(committed), ...readdirSync(fresh)]);
    const stale = [...names].filter((name) => read(join(committed, name)) !== read(join(fresh, name)));
    if (stale.length) {
      console.error(`types/ differs from a fresh generation (${stale.join(", ")}): run \`npm run generate\``);
      process.exit(1);
    }
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
}

/** @param {string} path */
function read(path) {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}
