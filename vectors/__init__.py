"""The bundled JSON vectors (data only; see vectors/README.md)."""
