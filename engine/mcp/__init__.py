"""MCP servers (issue 32 section 3): their configuration (`agentrio.engine.mcp.config`),
their connections and states (`agentrio.engine.mcp.servers`), and the tools they bring
(`agentrio.engine.mcp.tool`). The ``mcp`` SDK is imported only by the modules that
talk to a server, and those only when ``[mcp.NAME]`` tables exist, so a daemon
without MCP servers never loads it."""
