from enum import StrEnum


class HttpTargetBody(StrEnum):
    ENVELOPE = "envelope"
    PAYLOAD = "payload"

    def __str__(self) -> str:
        return str(self.value)
