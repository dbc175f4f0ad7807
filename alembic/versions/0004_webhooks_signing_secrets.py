"""Standard Webhooks signing secrets, and room for a rotation's previous secret.

Secrets were `whsec_` + URL-safe random text, used as the HMAC key byte for byte; Standard Webhooks
libraries base64-decode what follows `whsec_` and use those bytes. Each stored secret is rewritten as
`whsec_` + base64(old secret as UTF-8): the HMAC key stays the same bytes, only its spelling changes,
so a tenant can derive the new form itself (`"whsec_" + base64(old)`) or rotate. One format is
stored from here on; nothing decodes two.

`previous_signing_secret` is valid until `previous_expires_at` (a rotation's overlap), during which
webhooks carry a signature under each.

Downgrade drops the rotation columns and leaves the secrets in the new spelling (the old code uses any
string as its key, so they still sign; receivers then need the string as stored).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE tenants ADD COLUMN previous_signing_secret text, "
        "ADD COLUMN previous_expires_at timestamptz"
    )
    # encode(..., 'base64') wraps at 76 characters: the newlines are not part of the secret.
    op.execute(
        "UPDATE tenants SET signing_secret = "
        "'whsec_' || replace(encode(convert_to(signing_secret, 'UTF8'), 'base64'), E'\\n', '')"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE tenants DROP COLUMN previous_signing_secret, DROP COLUMN previous_expires_at")
