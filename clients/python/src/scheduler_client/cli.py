"""schedctl: the API from a shell, on the Python client.

    schedctl runs submit --tenant acme --job send-report --payload '{"user": 42}' --output json
    schedctl runs wait <run id> --timeout 60
    schedctl events publish --tenant acme order.placed --payload '{"order": 7}'

The API's address and key come from SCHEDULER_API_URL and SCHEDULER_API_KEY (or --url and
--api-key), the tenant from --tenant (or SCHEDULER_TENANT). Exit status: 0 done; 1 the API
answered with a problem (its detail on stderr), could not be reached, or `wait` timed out; 2 the
command line is wrong."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from scheduler_client import calls
from scheduler_client import operations as ops
from scheduler_client.client import Client
from scheduler_client.errors import ApiError
from scheduler_client.generated.models import KeyCreateScopesItem
from scheduler_client.output import show

MAX_PAGE = 500


@dataclass
class Shown:
    """What a command prints: the API's JSON as it came (a listing's items, page after page), and
    for a listing the kind of its items ("runs", "jobs", "keys", "groups"), which names its table's
    columns."""

    json: Any
    listing: str | None = None


Handler = Callable[[Client, argparse.Namespace], Shown | None]


def _answer(client: Client, op: calls.Op[Any], field: str | None = None) -> Shown:
    """One call's JSON (its member `field`, a list, when given)."""
    response = client._send(op)
    op.result(response)  # what the client would refuse, schedctl refuses too
    body = json.loads(response.content)
    return Shown(body) if field is None else Shown(body[field], field)


def _listing(client: Client, pages: calls.Pages[Any, Any], limit: int) -> Shown:
    """At most `limit` items of a listing, page after page."""
    shown = Shown([], pages.field)
    cursor: str | None = None
    while len(shown.json) < limit:
        page = _answer(client, pages.page(cursor)).json
        shown.json += page[pages.field][: limit - len(shown.json)]
        if (cursor := page["next_cursor"]) is None:
            break
    return shown


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None


def _object(text: str) -> dict[str, Any]:
    value = _json(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("not a JSON object")
    return value


def _tenant(args: argparse.Namespace) -> str:
    if not args.tenant:
        raise _Usage("a tenant is needed: --tenant or SCHEDULER_TENANT")
    return str(args.tenant)


class _Usage(Exception):
    """The command line lacks something argparse cannot tell on its own."""


# ───────────────────────────── handlers ─────────────────────────────


def _submit(c: Client, a: argparse.Namespace) -> Shown:
    given = {
        "priority": a.priority,
        "depends_on": a.depends_on,
        "on_parent_failure": a.on_parent_failure,
        "pass_results": a.pass_results or None,
        "group": {"id": a.group_id} if a.group_id is not None else None,
    }
    fields = {name: value for name, value in given.items() if value is not None}
    op = ops.submit_run_op(_tenant(a), a.job, a.payload, a.scheduled_at, a.idempotency_key, fields)
    return _answer(c, op)


def _list_runs(c: Client, a: argparse.Namespace) -> Shown:
    filters = {
        k: v for k, v in (("status", a.status), ("job", a.job), ("group", a.group_id)) if v is not None
    }
    return _listing(c, ops.run_pages(_tenant(a), {"limit": min(a.limit, MAX_PAGE), **filters}), a.limit)


def _wait(c: Client, a: argparse.Namespace) -> Shown:
    c.wait(a.run_id, timeout=a.timeout)
    return _answer(c, ops.get_run_op(a.run_id))


def _put_job(c: Client, a: argparse.Namespace) -> Shown:
    fields = dict(a.fields or {})
    for name in ("target", "schedule", "payload"):
        if getattr(a, name) is not None:
            fields[name] = getattr(a, name)
    return _answer(c, ops.put_job_op(_tenant(a), a.name, fields))


def _trigger(c: Client, a: argparse.Namespace) -> Shown:
    return _answer(c, ops.submit_run_op(_tenant(a), a.name, a.payload, None, a.idempotency_key, {}))


RUNS: dict[str, Handler] = {
    "submit": _submit,
    "get": lambda c, a: _answer(c, ops.get_run_op(a.run_id)),
    "list": _list_runs,
    "cancel": lambda c, a: _answer(c, ops.cancel_run_op(a.run_id)),
    "retry": lambda c, a: _answer(c, ops.retry_run_op(a.run_id, a.max_attempts)),
    "wait": _wait,
}
JOBS: dict[str, Handler] = {
    "put": _put_job,
    "get": lambda c, a: _answer(c, ops.get_job_op(_tenant(a), a.name)),
    "list": lambda c, a: _listing(c, ops.job_pages(_tenant(a), min(a.limit, MAX_PAGE)), a.limit),
    "pause": lambda c, a: _answer(c, ops.pause_job_op(_tenant(a), a.name, True)),
    "resume": lambda c, a: _answer(c, ops.pause_job_op(_tenant(a), a.name, False)),
    "trigger": _trigger,
}
GROUPS: dict[str, Handler] = {
    "get": lambda c, a: _answer(c, ops.get_group_op(_tenant(a), a.group_id)),
    "list": lambda c, a: _listing(c, ops.group_pages(_tenant(a), min(a.limit, MAX_PAGE)), a.limit),
}
EVENTS: dict[str, Handler] = {
    "publish": lambda c, a: _answer(
        c, ops.publish_event_op(_tenant(a), a.name, a.payload, a.idempotency_key), "runs"
    ),
}
KEYS: dict[str, Handler] = {
    "list": lambda c, a: _answer(c, ops.list_keys_op(_tenant(a)), "keys"),
    "create": lambda c, a: _answer(c, ops.create_key_op(_tenant(a), a.scope)),
    "revoke": lambda c, a: c.revoke_key(_tenant(a), a.key_id),
}


# ───────────────────────────── the command line ─────────────────────────────


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", default=os.environ.get("SCHEDULER_API_URL"), help="default: $SCHEDULER_API_URL"
    )
    common.add_argument(
        "--api-key", default=os.environ.get("SCHEDULER_API_KEY"), help="default: $SCHEDULER_API_KEY"
    )
    common.add_argument(
        "--tenant", default=os.environ.get("SCHEDULER_TENANT"), help="default: $SCHEDULER_TENANT"
    )
    common.add_argument("--output", "-o", choices=["table", "json"], default="table")
    return common


def parser() -> argparse.ArgumentParser:
    common = _common()
    top = argparse.ArgumentParser(
        prog="schedctl", description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2]
    )
    groups = top.add_subparsers(dest="group", required=True)

    def command(group: Any, name: str, handler: Handler, help: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(name, parents=[common], help=help, description=help)
        sub.set_defaults(handler=handler)
        return sub

    runs = groups.add_parser("runs", help="submit, read, list, cancel, retry and wait for runs")
    r = runs.add_subparsers(dest="command", required=True)
    p = command(r, "submit", RUNS["submit"], "submit a run of a job")
    p.add_argument("--job", required=True)
    p.add_argument("--payload", type=_json, help="JSON (default: the job's payload)")
    p.add_argument("--scheduled-at", help="ISO 8601 with a time zone (default: now)")
    p.add_argument("--idempotency-key", help="default: a new one (a retried request keeps it)")
    p.add_argument("--priority", type=int)
    p.add_argument(
        "--depends-on", action="append", type=uuid.UUID, metavar="RUN_ID", help="a parent (repeat it)"
    )
    p.add_argument("--on-parent-failure", choices=["cancel", "run"], help="default: cancel")
    p.add_argument("--pass-results", action="store_true", help="deliver the parents' results too")
    p.add_argument(
        "--group", dest="group_id", type=uuid.UUID, metavar="GROUP_ID", help="an open group to join"
    )
    for name, help in (("get", "show a run"), ("cancel", "cancel a run"), ("retry", "retry a run")):
        p = command(r, name, RUNS[name], help)
        p.add_argument("run_id", type=uuid.UUID)
    p.add_argument("--max-attempts", type=int)
    p = command(r, "wait", RUNS["wait"], "wait until a run has ended, then show it")
    p.add_argument("run_id", type=uuid.UUID)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    p = command(r, "list", RUNS["list"], "list runs, newest scheduled first")
    p.add_argument("--status")
    p.add_argument("--job")
    p.add_argument("--group", dest="group_id", type=uuid.UUID, metavar="GROUP_ID")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")

    jobs = groups.add_parser("jobs", help="put, read, list, pause, resume and trigger jobs")
    j = jobs.add_subparsers(dest="command", required=True)
    p = command(j, "put", JOBS["put"], "create or replace a job")
    p.add_argument("name")
    p.add_argument("--target", type=_object, help='JSON, e.g. {"type": "http", "url": "https://..."}')
    p.add_argument("--schedule", help="a cron expression")
    p.add_argument("--payload", type=_json, help="JSON: the runs' default payload")
    p.add_argument("--fields", type=_object, help="JSON object: any other fields of the job")
    for name, help in (("get", "show a job"), ("pause", "pause a job"), ("resume", "resume a job")):
        command(j, name, JOBS[name], help).add_argument("name")
    p = command(j, "trigger", JOBS["trigger"], "run a job now")
    p.add_argument("name")
    p.add_argument("--payload", type=_json, help="JSON (default: the job's payload)")
    p.add_argument("--idempotency-key")
    p = command(j, "list", JOBS["list"], "list jobs by name")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")

    group_commands = groups.add_parser("groups", help="read the tenant's groups")
    g = group_commands.add_subparsers(dest="command", required=True)
    command(g, "get", GROUPS["get"], "show a group's progress").add_argument("group_id", type=uuid.UUID)
    p = command(g, "list", GROUPS["list"], "list groups, newest first")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")

    events = groups.add_parser("events", help="publish an event: a run of every job subscribed to it")
    e = events.add_subparsers(dest="command", required=True)
    p = command(e, "publish", EVENTS["publish"], "run every job subscribed to an event")
    p.add_argument("name")
    p.add_argument("--payload", type=_json, help="JSON (default: each job's payload)")
    p.add_argument("--idempotency-key", help="default: a new one (a retried request keeps it)")

    keys = groups.add_parser("keys", help="list, create and revoke the tenant's API keys")
    k = keys.add_subparsers(dest="command", required=True)
    command(k, "list", KEYS["list"], "list the tenant's keys")
    p = command(k, "create", KEYS["create"], "issue another key (shown once)")
    p.add_argument(
        "--scope",
        action="append",
        choices=[s.value for s in KeyCreateScopesItem],
        help="a scope the key holds (repeat it; default: every scope)",
    )
    command(k, "revoke", KEYS["revoke"], "revoke a key").add_argument("key_id", type=uuid.UUID)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if not args.url or not args.api_key:
        cli.error("the API's address and key are needed: --url and --api-key, or their variables")
    try:
        with Client(args.url, args.api_key) as client:
            shown = args.handler(client, args)
        if shown is not None:  # a 204 shows nothing
            show(shown.json, shown.listing, args.output, sys.stdout)
    except _Usage as error:
        cli.error(str(error))
    except ApiError as error:
        where = f", field {error.field}" if error.field else ""
        print(f"schedctl: {error.detail} ({error.status} {error.code}{where})", file=sys.stderr)
        return 1
    except httpx.TransportError as error:
        print(f"schedctl: cannot reach {args.url}: {error!r}", file=sys.stderr)
        return 1
    except TimeoutError as error:
        print(f"schedctl: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
