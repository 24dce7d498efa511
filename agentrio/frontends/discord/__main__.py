"""``python -m agentrio.frontends.discord``: how the daemon starts the bot."""

import sys

from agentrio.frontends.discord.main import main

sys.exit(main())
