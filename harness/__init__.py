"""Harness: drives real implementations with the vectors; asks the reference for answers."""
