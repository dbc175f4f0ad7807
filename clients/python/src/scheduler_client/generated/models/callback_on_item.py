from enum import StrEnum


class CallbackOnItem(StrEnum):
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    FAILED = "failed"
    SUCCEEDED = "succeeded"

    def __str__(self) -> str:
        return str(self.value)
