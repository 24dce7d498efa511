"""``python -m agentrio.frontends.telegram``: how the daemon starts the bot."""

import sys

from agentrio.frontends.telegram.main import main

sys.exit(main())
