"""`openheim serve`: the WebSocket server (ACP on /acp and /ws), REST and OpenAPI, the fs channel, who may
connect (guard) and the web page (web/)."""
