"""The Telegram front-end: python-telegram-bot on asyncio, the chat core on Trio
(docs/frontends.md). ``python -m agentrio.frontends.telegram`` or ``agentrio telegram``."""
