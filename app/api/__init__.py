"""HTTP only: routes, request/response schemas, auth dependency. Rules live in app.services."""
