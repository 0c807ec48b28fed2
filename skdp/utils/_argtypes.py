"""argparse value types shared by the ``skdp`` subcommands."""

import argparse
import math

__all__ = ["positive", "probability"]


def positive(kind):
    """Parser of a finite number of type ``kind`` that must be > 0."""

    def parse(text):
        value = kind(text)
        if not value > 0 or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
        return value

    return parse


def probability(text):
    """Parser of a number in the open interval (0, 1)."""
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value
