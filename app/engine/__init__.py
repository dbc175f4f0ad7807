"""The engine: claim loop and dispatch, lease reaper, cron materializer, partition maintenance."""
