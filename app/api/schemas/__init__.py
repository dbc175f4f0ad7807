"""Request and response bodies of the HTTP API (the OpenAPI contract in openapi.json), by resource.

- common: the tenant id and job name patterns (`JobName`), the rules jobs and runs share (payload,
  `Priority`, the target types), `Strict`, problem details (`Problem`, `error_responses`,
  `serve_problems_as_problem_json`, `RETRY_AFTER`), `json_response` and `Health`.
- tenants: the tenant, its API keys and signing secret, pause, and max_in_flight (`TenantPatch`).
- jobs: the job, the job list, `job_out` and a cron job's `Backfill`.
- job_rules: a job's rules over its runs: `Concurrency`, `RateLimit`, `Unique`, `Debounce`.
- runs: the status names, `IdempotencyKey`, run submission (one or a batch), the run and its
  attempts, lists, retry, reschedule, and bulk actions on the runs a filter matches (`RunFilter`,
  `RunAction`, `RunActionResult`).

Import from the module itself; this package re-exports nothing.
"""
