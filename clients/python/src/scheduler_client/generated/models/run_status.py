from enum import StrEnum


class RunStatus(StrEnum):
    CANCELLED = "cancelled"
    DISPATCHED = "dispatched"
    EXPIRED = "expired"
    FAILED = "failed"
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"

    def __str__(self) -> str:
        return str(self.value)
