"""Every named statement (app/db/*.sql) that writes job_runs names the triggers it fires
(`-- fires:`), and only those: read from the statement's SQL and app/db/schema/'s triggers
(tests/query_triggers.py)."""

from __future__ import annotations

import re

from app.db.queries import SQL_FILES
from tests.query_triggers import SCHEMA, blocks, declared_fires, expected_fires, schema_triggers


def test_every_write_to_job_runs_names_the_triggers_it_fires() -> None:
    triggers = schema_triggers()
    wrong = []
    for path in SQL_FILES:
        for name, block in blocks(path.read_text()).items():
            expected = expected_fires(block, triggers) or None
            if declared_fires(block) != expected:
                line = f"-- fires: {', '.join(sorted(expected))}" if expected else "no -- fires: line"
                declared = sorted(declared_fires(block) or [])
                wrong.append(f"{path.name} {name}: wants {line} (declared {declared})")
    assert not wrong, "run `python -m tests.query_triggers` to rewrite them:\n" + "\n".join(wrong)


def test_every_trigger_of_the_schema_is_read() -> None:
    text = "\n".join(p.read_text() for p in SCHEMA.glob("*.sql"))
    created = set(re.findall(r"CREATE TRIGGER (\w+)[^;]*? ON job_runs\b", text))
    assert created and set(schema_triggers()) == created


def test_what_a_statement_fires() -> None:
    triggers = schema_triggers()
    assert expected_fires("INSERT INTO job_runs (id) VALUES (1)", triggers) == {
        "job_runs_queue_added",
        "job_runs_record_tags",
    }
    # A claim sets status to 'dispatched': no callback, no failure streak, no dependents settled; the
    # groups' statement trigger has no condition, so every UPDATE fires it.
    claim = "UPDATE job_runs r SET status = 'dispatched', epoch = r.epoch + 1 FROM q WHERE r.id = q.id"
    assert expected_fires(claim, triggers) == {
        "job_runs_queue_changed",
        "job_runs_flow_control",
        "job_runs_count_group_runs",
    }
    # An end may be a failure: every status trigger may fire. A heartbeat sets no status.
    finish = "UPDATE job_runs SET status = CASE WHEN x THEN 'failed' ELSE 'succeeded' END WHERE id = 1"
    assert "job_runs_failure_streak" in expected_fires(finish, triggers)
    assert expected_fires("UPDATE job_runs SET lease_expires_at = now() WHERE id = 1", triggers) == {
        "job_runs_queue_changed",
        "job_runs_flow_control",
        "job_runs_count_group_runs",
    }
    # A write in a CTE counts; a comment or another table does not.
    cte = "WITH d AS (DELETE FROM job_runs WHERE id = 1 RETURNING id) SELECT 1 -- UPDATE job_runs"
    assert expected_fires(cte, triggers) == {"job_runs_queue_removed"}
    assert expected_fires("UPDATE jobs SET paused = true", triggers) == set()


def test_a_missing_or_wrong_line_is_found() -> None:
    triggers = schema_triggers()
    block = "\nUPDATE job_runs SET status = 'cancelled' WHERE id = 1;\n"
    assert declared_fires(block) is None and expected_fires(block, triggers)
    wrong = "-- fires: job_runs_queue_changed\n" + block
    assert declared_fires(wrong) != expected_fires(wrong, triggers)
