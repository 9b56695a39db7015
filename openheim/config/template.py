"""What `openheim init` writes: the config template and the default identity."""

from __future__ import annotations

DEFAULT_IDENTITY = "You are Openheim, a multipurpose, multiprovider LLM agent."

CONFIG_TEMPLATE = """\
# openheim configuration. Docs: README.md ("Configuration").
# Keys are read from the environment variable named by env_var (or api_key, which is less safe).

default_provider = "openai"
max_iterations = 10
# max_tokens_total = 200000          # token budget per turn (input + output over every model call)
# turn_timeout_secs = 600            # time budget per turn (wall clock)
# default_skills = ["rust"]          # skills added to every new conversation
# work_dir = "/path/to/project"      # sandbox root for file tools (default: the session's cwd)
# allow_shell = false                # set true to give the model execute_command
# mcp_startup_timeout_secs = 10      # how long a turn waits for MCP servers still starting
# mcp_max_message_mib = 8            # a bigger message from an MCP server is refused

[sandbox]                            # how the kernel confines shell commands (docs/security.md)
# mode = "workspace-write"           # read-only | workspace-write | off
# network = false                    # true: commands may open TCP/UDP sockets
# writable_roots = []                # extra absolute directories commands may write
# required = false                   # true: refuse commands when the kernel cannot enforce the mode

[tui]
# theme_color = "gray"               # white, gray, blue, cyan, magenta, green, yellow, red, pink

[providers.openai]
api_base = "https://api.openai.com/v1"
default_model = "gpt-4o"
models = ["gpt-4o", "gpt-4.1", "gpt-4o-mini"]
env_var = "OPENAI_API_KEY"

[providers.anthropic]
api_base = "https://api.anthropic.com/v1"
default_model = "claude-sonnet-4-6"
models = ["claude-sonnet-4-6", "claude-opus-4-7", "claude-haiku-4-5-20251001"]
env_var = "ANTHROPIC_API_KEY"
# thinking = "adaptive"              # or "off"

[providers.gemini]
api_base = "https://generativelanguage.googleapis.com/v1beta"
default_model = "gemini-3.8-flash"
models = ["gemini-3.8-flash", "gemini-2.5-pro"]
env_var = "GEMINI_API_KEY"

# Any OpenAI-compatible server (vLLM, llama.cpp, LM Studio, OpenRouter, ...):
# [providers.openrouter]
# kind = "openai_compatible"
# api_base = "https://openrouter.ai/api/v1"
# default_model = "deepseek/deepseek-chat"
# models = []                        # empty: any model name is accepted
# env_var = "OPENROUTER_API_KEY"
# context_window = 128000            # enables compaction and proactive history trimming

# A local Ollama server (no key):
# [providers.ollama]
# api_base = "http://localhost:11434/v1"
# default_model = "llama3.1"
# models = ["llama3.1", "qwen2.5-coder"]

# Long-term memory with semantic search (keyword search works without this):
# [memory]
# embedding_provider = "openai"
# embedding_model = "text-embedding-3-small"
# top_k = 5

# MCP servers (tools appear as server__tool; `openheim mcp` shows their status; a project's
# .mcp.json is used after `openheim mcp trust`; `openheim mcp login NAME` signs in to one that needs OAuth):
# [mcp_servers.files]
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
#
# [mcp_servers.remote]
# url = "https://mcp.example.com/mcp"
# headers = { Authorization = "Bearer ..." }

# What your models cost (US dollars per million tokens; none are shipped: use your price list), and a
# dollar budget per turn (`openheim run --max-cost USD` for one run):
# [prices."anthropic/claude-sonnet-4-6"]
# input = 3.0
# output = 15.0
# cache_read = 0.30                  # default: the input price
# cache_write = 3.75                 # default: the input price
#
# [budgets]
# max_cost = 2.00

# Hooks: your own commands before/after tool calls, on prompts, at session start and stop (docs/hooks.md):
# [[hooks]]
# event = "pre_tool"                 # session_start | user_prompt | pre_tool | post_tool | stop
# matcher = "execute_command(git push *)"
# command = "~/.openheim/hooks/no-push-to-main.sh"

# Long sessions: summarise the conversation at 80% of the context window; checkpoint the files
# a turn changes so `openheim undo` can restore them (see docs/long-sessions.md):
# [compaction]
# compact_at = 0.8
# compaction_model = "anthropic/claude-haiku-4-5-20251001"   # default: the session's own model
# [checkpoints]
# max_file_bytes = 10485760          # bigger files are listed as not restorable
# max_age_days = 30
# max_store_mb = 2048

# `openheim serve` (ACP over WebSocket, a REST API and a web page):
# [serve]
# host = "127.0.0.1"                 # another address needs a token
# port = 1217
# token_env = "OPENHEIM_SERVE_TOKEN" # the variable holding the token
# cors_origins = []                  # e.g. ["https://app.example.com"]
"""
