"""Checkpoints of a session's sandbox root, taken before a turn first changes a file, and undo of what it changed."""
