"""Fault injection and load: the harness and load driver (runnable by hand) and their short CI tests."""
