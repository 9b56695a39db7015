"""A minimal MCP server with the standard library only (newline-delimited JSON-RPC on stdio): one
`echo` tool. It starts in ~20 ms, so a benchmark that uses it measures openheim's side, not the SDK's.
`--delay N`: it answers `initialize` only after N seconds (a server slow to start, using no CPU meanwhile)."""

import json
import sys
import time

DELAY = float(sys.argv[sys.argv.index("--delay") + 1]) if "--delay" in sys.argv else 0.0


def reply(request_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}

for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # notifications
    if method == "initialize":
        time.sleep(DELAY)
        reply(
            request_id,
            {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            },
        )
    elif method == "tools/list":
        reply(request_id, {"tools": [TOOL]})
    elif method == "tools/call":
        text = message["params"].get("arguments", {}).get("text", "")
        reply(request_id, {"content": [{"type": "text", "text": f"echo: {text}"}], "isError": False})
    else:
        sys.stdout.write(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "method not found"}})
            + "\n"
        )
        sys.stdout.flush()
