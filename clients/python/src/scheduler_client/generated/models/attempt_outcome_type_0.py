from enum import StrEnum


class AttemptOutcomeType0(StrEnum):
    CANCELLED = "cancelled"
    FAILED = "failed"
    LOST = "lost"
    SUCCEEDED = "succeeded"
    TIMED_OUT = "timed_out"

    def __str__(self) -> str:
        return str(self.value)
