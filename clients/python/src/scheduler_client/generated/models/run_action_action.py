from enum import StrEnum


class RunActionAction(StrEnum):
    CANCEL = "cancel"
    RETRY = "retry"

    def __str__(self) -> str:
        return str(self.value)
