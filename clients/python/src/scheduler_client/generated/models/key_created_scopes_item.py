from enum import StrEnum


class KeyCreatedScopesItem(StrEnum):
    JOBSREAD = "jobs:read"
    JOBSWRITE = "jobs:write"
    RUNSREAD = "runs:read"
    RUNSWRITE = "runs:write"
    TENANTADMIN = "tenant:admin"

    def __str__(self) -> str:
        return str(self.value)
