"""The models (R61): the protocol every model plugs in behind, and building the
configured ones. The public face for code outside the engine (a bench measuring the
model layer, a plugin's own model): `Model`, its messages, `make_model` and
`close_model`. Importing it imports no provider: each is imported when built.
"""

from __future__ import annotations

from agentrio.engine.models.base import ContextLengthError as ContextLengthError
from agentrio.engine.models.base import Message as Message
from agentrio.engine.models.base import Model as Model
from agentrio.engine.models.base import ModelError as ModelError
from agentrio.engine.models.base import ModelReply as ModelReply
from agentrio.engine.models.base import ToolCallRequest as ToolCallRequest
from agentrio.engine.models.base import ToolSpec as ToolSpec
from agentrio.engine.models.factory import close_model as close_model
from agentrio.engine.models.factory import make_model as make_model

__all__ = [
    "ContextLengthError",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "ToolCallRequest",
    "ToolSpec",
    "close_model",
    "make_model",
]
