"""API key scopes: each key holds the scopes it was issued with (runs:read, runs:write, jobs:read,
jobs:write, tenant:admin); a route a key's scopes do not cover answers 403 (app/api/scopes.py).

The column's default is every scope: keys issued before it keep the full access they had, and a
key an older release issues during a rolling upgrade gets it too. Adding a column with a constant
default is a catalog change, whatever the number of keys.

Revision ID: 0025
Revises: 0022
Create Date: 2026-12-04
"""

from app.db.migrations import run_script

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE api_keys ADD COLUMN scopes text[] NOT NULL
    DEFAULT ARRAY['runs:read', 'runs:write', 'jobs:read', 'jobs:write', 'tenant:admin']
    CHECK (cardinality(scopes) > 0);
"""

DOWNGRADE = r"""
ALTER TABLE api_keys DROP COLUMN scopes;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
