"""Front-end commands: one module per `openheim` subcommand (run, acp, serve, permissions, mcp, memory,
sessions, doctor, init, undo, sandbox). Each parses its options, opens the door (OpenheimClient) and renders
what it gets."""
