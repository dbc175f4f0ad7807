from enum import StrEnum


class JobPutMisfire(StrEnum):
    ALL = "all"
    LATEST = "latest"
    SKIP = "skip"

    def __str__(self) -> str:
        return str(self.value)
