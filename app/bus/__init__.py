"""Transports: the engine->worker message (one versioned model), JetStream connect/provision/publish,
and the optional Redis hot index of due runs (a hint, never the truth)."""
