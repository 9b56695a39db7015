"""A sloppy or hostile MCP server (standard library only, newline-delimited JSON-RPC on stdio), for the fault tests.

    python tests/support/mcp_hostile_server.py [--banner] [--bad-tool] [--tools N] [--schema-kib K] [--stderr-mib M]

Tools: echo; huge(mib) answers with a text of that many MiB (written in pieces, never held whole by a
well-behaved client); with --bad-tool also a tool whose inputSchema is a string; --tools N adds N small tools;
--schema-kib K gives echo a description K KiB long. --banner prints lines that are not JSON on stdout first
(as a stray print() would); --stderr-mib M writes M MiB to stderr when echo is called.
"""

import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--banner", action="store_true")
parser.add_argument("--bad-tool", action="store_true")
parser.add_argument("--tools", type=int, default=0)
parser.add_argument("--schema-kib", type=int, default=0)
parser.add_argument("--stderr-mib", type=int, default=0)
parser.add_argument("--tag", help="ignored; lets a test find its processes by command line")
opts = parser.parse_args()
out = sys.stdout.buffer


def send(message: dict) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def tools() -> list:
    echo = {
        "name": "echo",
        "description": "Echo the text back." + " " * (opts.schema_kib * 1024),
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
    found = [
        echo,
        {
            "name": "huge",
            "description": "A text of `mib` MiB.",
            "inputSchema": {"type": "object", "properties": {"mib": {"type": "integer"}}},
        },
    ]
    if opts.bad_tool:
        found.append({"name": "broken", "description": "Its schema is not an object.", "inputSchema": "nope"})
    found += [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(opts.tools)]
    return found


def huge(request_id: int, mib: int) -> None:
    """The response line, written in 1 MiB pieces: id first, as servers usually write it."""
    out.write(b'{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' % request_id)
    piece = b"x" * (1 << 20)
    for _ in range(mib):
        out.write(piece)
    out.write(b'"}], "isError": false}}\n')
    out.flush()


if opts.banner:
    out.write(b"Starting the hostile server v1.0 ...\nlistening on stdio\n")
    out.flush()
for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools()}})
    elif method == "tools/call":
        name, args = message["params"]["name"], message["params"].get("arguments") or {}
        if name == "huge":
            huge(request_id, int(args.get("mib", 1)))
            continue
        if opts.stderr_mib:
            sys.stderr.write(("e" * 1023 + "\n") * 1024 * opts.stderr_mib)
            sys.stderr.flush()
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {"content": [{"type": "text", "text": f"echo: {args.get('text', '')}"}]},
            }
        )
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "method not found"}})
