"""SSH transport: connections (host keys as OpenSSH reads them), channels, sessions, fan-out."""
