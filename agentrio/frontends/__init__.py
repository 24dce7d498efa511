"""Chat front-ends: a platform-neutral core (`agentrio.frontends.chat`) and one adapter
per platform (`agentrio.frontends.telegram`, `agentrio.frontends.discord`), run by
`agentrio.frontends.hosting` and set up by `agentrio.frontends.setup`. A front-end imports only
`protocol` and the client (`agentrio`), never the engine (tests/test_layering.py)."""
