"""Settings that only make sense together."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings


def test_urgent_only_processes_need_the_urgent_lane() -> None:
    with pytest.raises(ValidationError, match="URGENT_PRIORITY is -1"):
        Settings(lanes="urgent", urgent_priority=-1)
    assert Settings(lanes="normal", urgent_priority=-1).serves("normal")
    assert not Settings(lanes="urgent").serves("normal")
    assert Settings().serves("urgent") and Settings().serves("normal")


def test_nats_url_names_one_server_or_a_cluster() -> None:
    assert Settings(nats_url="nats://n1:4222").nats_servers == ["nats://n1:4222"]
    cluster = Settings(nats_url="nats://n1:4222, nats://n2:4222,nats://n3:4222")
    assert cluster.nats_servers == ["nats://n1:4222", "nats://n2:4222", "nats://n3:4222"]
    with pytest.raises(ValidationError, match="an empty server"):
        Settings(nats_url="nats://n1:4222,,nats://n3:4222")


@pytest.mark.parametrize("replicas", [0, 6])
def test_stream_replicas_are_one_to_five(replicas: int) -> None:
    with pytest.raises(ValidationError, match="stream_replicas"):
        Settings(stream_replicas=replicas)
    assert Settings().stream_replicas == 1
