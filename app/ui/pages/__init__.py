"""The dashboard's pages (GET only; what changes something is in actions.py). Each page reads
through the same services as the HTTP API, scoped to the session's tenant; the admin picks one."""
