"""The version of openheim (a leaf: importing it loads nothing else)."""

__version__ = "0.1.0"
