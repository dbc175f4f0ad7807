from enum import StrEnum


class ListAuditEventsActionType0(StrEnum):
    JOB_BACKFILLED = "job.backfilled"
    JOB_DELETED = "job.deleted"
    JOB_PAUSED = "job.paused"
    JOB_PUT = "job.put"
    JOB_RESUMED = "job.resumed"
    JOB_TRIGGERED = "job.triggered"
    KEY_CREATED = "key.created"
    KEY_REVOKED = "key.revoked"
    RUNS_BULK_CANCELLED = "runs.bulk_cancelled"
    RUNS_BULK_RETRIED = "runs.bulk_retried"
    RUN_CANCELLED = "run.cancelled"
    RUN_RESCHEDULED = "run.rescheduled"
    RUN_RETRIED = "run.retried"
    SIGNING_SECRET_ROTATED = "signing_secret.rotated"
    TENANT_CREATED = "tenant.created"
    TENANT_PATCHED = "tenant.patched"
    TENANT_PAUSED = "tenant.paused"
    TENANT_RESUMED = "tenant.resumed"

    def __str__(self) -> str:
        return str(self.value)
