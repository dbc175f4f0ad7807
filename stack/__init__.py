"""The test stack the tests, the fault harness and the bench share (procrastinate's `testing`
module): real servers, configured or embedded (servers.py), and a three-server NATS cluster on
loopback (nats_cluster.py); a database cloned from a template migrated once (databases.py);
settings with names of their own and the environment of a `scheduler` subprocess (settings.py);
polling until a condition holds (eventually.py); a highly available Postgres under Patroni, for
failover (patroni.py); and the reference forms of production queries that tests and the bench
compare against (reference.py); an engine's dispatcher driven one batch at a time, and its phases'
busy time (dispatch.py). Never part of the runtime image (.dockerignore) nor imported by
app/."""
