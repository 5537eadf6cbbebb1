"""MCP servers at run time: their secrets sealed and opened (``secrets``), and the
connections one run (or one tool discovery) holds to them, through
``langchain.mcp.MCPAdapter`` (``session``). ``session`` loads LangChain and FastMCP;
``secrets`` loads neither, for the API and the CLI."""
