"""Internal helpers (validation, scikit-learn compatibility)."""
