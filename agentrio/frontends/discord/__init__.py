"""The Discord front-end: discord.py on asyncio, the chat core on Trio
(docs/frontends.md). ``python -m agentrio.frontends.discord`` or ``agentrio discord``."""
