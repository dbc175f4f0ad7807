"""Dashboard sessions: an API key or the admin token exchanged for a server-side session.

The browser holds only a random token in an HttpOnly cookie; the table keeps its SHA-256, so a
copy of the table opens no session. A `link` row is a one-time sign-in link (`scheduler dev`
prints one): redeeming it deletes it and makes a `session` row. A tenant's session names the key
it was opened with, and ends with it: revoking the key (or deleting the tenant) ends the session.

Revision ID: 0011
Revises: 0007
Create Date: 2026-12-01
"""

from app.db.migrations import run_script

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE ui_sessions (
    token_hash  bytea PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('session', 'link')),
    -- NULL and NULL: the admin (every tenant).
    tenant_id   text REFERENCES tenants (id) ON DELETE CASCADE,
    key_id      uuid REFERENCES api_keys (id) ON DELETE CASCADE,
    csrf_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CHECK ((tenant_id IS NULL) = (key_id IS NULL))
);
CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);
"""

DOWNGRADE = r"""
DROP TABLE ui_sessions;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
