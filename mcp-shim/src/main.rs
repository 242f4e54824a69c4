//! `nish-mcp`: one host's MCP stdio server, forwarding tool calls to the broker.
fn main() {}
