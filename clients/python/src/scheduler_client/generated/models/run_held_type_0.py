from enum import StrEnum


class RunHeldType0(StrEnum):
    CONCURRENCY = "concurrency"
    PAUSED = "paused"
    RATE_LIMIT = "rate_limit"

    def __str__(self) -> str:
        return str(self.value)
