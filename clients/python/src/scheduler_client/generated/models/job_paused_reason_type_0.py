from enum import StrEnum


class JobPausedReasonType0(StrEnum):
    FAILURES = "failures"
    REQUESTED = "requested"

    def __str__(self) -> str:
        return str(self.value)
