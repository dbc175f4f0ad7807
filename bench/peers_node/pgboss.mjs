// pg-boss for `bench peers`: `node pgboss.mjs install|enqueue|work DSN [N|WORKERS BATCH]`. install:
// its schema and the queue `noop`. enqueue N: N jobs in one insert() call (its batch insert, one
// statement) and its tables analyzed, in one transaction, then prints `committed`. work WORKERS
// BATCH: WORKERS loops, each fetching up to BATCH jobs with fetch() and completing them with one
// complete() call (its batch fetch and complete; work() would wait its polling interval, at least
// 0.5 s, between fetches), idle 50 ms when the queue is empty; prints `ready`, runs until SIGTERM.
import PgBoss from "pg-boss";
import pg from "pg";

const [mode, dsn, arg, batchArg] = process.argv.slice(2);
const QUEUE = "noop";

async function open(max = 10) {
  // No cron scheduling: the bench has no schedules; maintenance (supervise) stays as deployed.
  const boss = new PgBoss({ connectionString: dsn, max, schedule: false });
  boss.on("error", (e) => process.stderr.write(`error: ${e.message}\n`));
  await boss.start();
  return boss;
}

async function install() {
  const boss = await open(2);
  await boss.createQueue(QUEUE);
  await boss.stop({ graceful: false, wait: true });
}

// Inserted and analyzed in one transaction (its `db` option runs the insert on our client), so the
// jobs become visible with fresh statistics, as our backlog does (bench/endtoend.py).
async function enqueue(n) {
  const boss = await open(2);
  const client = new pg.Client({ connectionString: dsn });
  await client.connect();
  await client.query("begin");
  const db = { executeSql: (text, values) => client.query(text, values) };
  await boss.insert(Array.from({ length: n }, () => ({ name: QUEUE, data: {} })), { db });
  await client.query("analyze pgboss.job, pgboss.queue");
  await client.query("commit");
  console.log("committed");
  await client.end();
  await boss.stop({ graceful: false, wait: true });
}

async function work(workers, batchSize) {
  const boss = await open(workers + 2);
  let stopping = false;
  const loop = async () => {
    while (!stopping) {
      const jobs = await boss.fetch(QUEUE, { batchSize });
      if (!jobs || jobs.length === 0) {
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      await boss.complete(QUEUE, jobs.map((j) => j.id));
    }
  };
  const loops = Array.from({ length: workers }, loop);
  for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => { stopping = true; });
  console.log("ready");
  await Promise.all(loops);
  await boss.stop({ graceful: false, wait: true });
}

if (mode === "install") await install();
else if (mode === "enqueue") await enqueue(parseInt(arg, 10));
else if (mode === "work") await work(parseInt(arg, 10), parseInt(batchArg, 10));
else throw new Error("usage: pgboss.mjs install|enqueue|work DSN [N|WORKERS BATCH]");
