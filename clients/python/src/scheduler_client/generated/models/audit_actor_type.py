from enum import StrEnum


class AuditActorType(StrEnum):
    ADMIN = "admin"
    KEY = "key"
    SESSION = "session"

    def __str__(self) -> str:
        return str(self.value)
