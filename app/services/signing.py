"""Webhook signing secrets and signatures, as Standard Webhooks (standardwebhooks.com) defines them.

A secret is `whsec_` + base64 of 32 random bytes; the HMAC key is the decoded bytes, which is what
the spec's libraries do with it. A signature is `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`;
during a rotation's overlap the header carries one per valid secret, space-separated, newest first.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
SECRET_BYTES = 32  # the spec's libraries want at least 24


def new_signing_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signing_key(secret: str) -> bytes:
    """The HMAC key of a stored secret. Strict: a secret that is not `whsec_` + standard base64 is a
    bug (migration 0004 re-encoded the old ones), and guessing at it would sign with the wrong key."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("signing secret lacks the whsec_ prefix")
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error as exc:
        raise ValueError("signing secret is not base64") from exc


def signature_header(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value: one `v1,<base64>` per key, space-separated."""
    signed = msg_id.encode() + b"." + str(timestamp).encode() + b"." + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode() for key in keys
    )
