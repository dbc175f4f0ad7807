from enum import StrEnum


class CallbackStateStatusType0(StrEnum):
    DELIVERED = "delivered"
    DELIVERING = "delivering"
    FAILED = "failed"
    PENDING = "pending"

    def __str__(self) -> str:
        return str(self.value)
