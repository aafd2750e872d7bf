"""The compliance report pipeline: results rows -> history (Parquet) -> matrix, changes, badges."""
