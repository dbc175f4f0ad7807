from enum import StrEnum


class RunHeldType0(StrEnum):
    CONCURRENCY = "concurrency"
    DEPENDENCIES = "dependencies"
    PAUSED = "paused"
    RATE_LIMIT = "rate_limit"

    def __str__(self) -> str:
        return str(self.value)
