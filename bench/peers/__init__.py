"""The peers `bench peers` drains the same no-op jobs with, each as a subprocess of its own on a
fresh database: pgqueuer (tuned as its docs advise: batches and several consumers) and procrastinate
(its defaults). Both are dev dependencies (the `dev` extra pins them); the scheduler never imports
them. Each module here is run as `python -m bench.peers.<name> DSN [options]`, prints `ready` once
it listens, and runs until SIGTERM."""
