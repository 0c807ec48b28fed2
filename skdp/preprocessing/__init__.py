"""Preprocessing that keeps a Pipeline private end to end."""

from ._scalers import BoundedScaler, DPStandardScaler

__all__ = ["BoundedScaler", "DPStandardScaler"]
