"""Subagents: delegated agent personas, defined as Markdown files in ``{data_dir}/agents``."""
