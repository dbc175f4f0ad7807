"""The worker: consume from JetStream, start the run (fenced), execute its target, record the
outcome in a group commit, and only then ack."""
