"""tracefix's built-in knowledge base: one TOML file per error entry (shipped as package data)."""
