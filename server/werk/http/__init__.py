"""What the two HTTP adapters (the API and the dashboard) both stand on: request-scoped access to
the process's services, and which proxy headers to believe."""
