// graphile-worker for `bench peers`: `node graphile.mjs install|enqueue|work DSN
// [N|defaults|fast]`. install: its migrations. enqueue N: N jobs `noop` in one add_jobs call (its
// batch API, one statement) and its tables analyzed, in one transaction, then prints `committed`.
// work defaults|fast: a runner with a no-op task, prints `ready`, runs until SIGTERM. `fast` is the
// performance page's preset: 24 concurrent jobs, a pool of 25, localQueue of 500,
// completeJobBatchDelay and failJobBatchDelay 0; `defaults` sets nothing.
import { Logger, run, runMigrations } from "graphile-worker";
import pg from "pg";

const [mode, dsn, arg] = process.argv.slice(2);
// Warnings and errors to stderr (the bench's log file); stdout carries only the protocol lines.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") process.stderr.write(`${level}: ${message}\n`);
});

const PRESETS = {
  defaults: {},
  fast: {
    concurrentJobs: 24,
    maxPoolSize: 25,
    localQueue: { size: 500 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};

// The jobs' tables are analyzed in the enqueue's transaction, so the jobs become visible with fresh
// statistics, as our backlog does (bench/endtoend.py): without them the planner took a 100k backlog
// for the empty table it had last seen, and the drain ran at half its rate.
async function enqueue(n) {
  const client = new pg.Client({ connectionString: dsn });
  await client.connect();
  const jobs = JSON.stringify(Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })));
  await client.query("begin");
  await client.query(
    "select 1 from graphile_worker.add_jobs(array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)))",
    [jobs],
  );
  await client.query(
    "analyze graphile_worker._private_jobs, graphile_worker._private_job_queues, graphile_worker._private_tasks",
  );
  await client.query("commit");
  console.log("committed");
  await client.end();
}

async function work(name) {
  const preset = PRESETS[name];
  if (!preset) throw new Error(`unknown preset ${name}`);
  const runner = await run({
    connectionString: dsn,
    logger,
    noHandleSignals: true,
    taskList: { noop: async () => {} },
    preset: { worker: preset },
  });
  for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => runner.stop());
  console.log("ready");
  await runner.promise;
}

if (mode === "install") await runMigrations({ connectionString: dsn, logger });
else if (mode === "enqueue") await enqueue(parseInt(arg, 10));
else if (mode === "work") await work(arg);
else throw new Error(`usage: graphile.mjs install|enqueue|work DSN [N|defaults|fast]`);
