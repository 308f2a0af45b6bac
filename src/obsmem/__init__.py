"""obsmem: observational memory for LLM agents.

Old conversation is compressed by an Observer into dated observations, a Reflector condenses
them when they grow, and the actor sees the observations plus a raw tail of recent messages.
Everything public is re-exported here; other module paths are implementation details, except
``obsmem.models.<vendor>`` and ``obsmem.models.testing``.
"""

from obsmem.config import MemoryConfig as MemoryConfig
from obsmem.config import ObservationConfig as ObservationConfig
from obsmem.config import ReflectionConfig as ReflectionConfig
from obsmem.config import RetrievalConfig as RetrievalConfig
from obsmem.errors import ConfigError as ConfigError
from obsmem.errors import InvalidInputError as InvalidInputError
from obsmem.errors import ModelError as ModelError
from obsmem.errors import NotFoundError as NotFoundError
from obsmem.errors import ObservationError as ObservationError
from obsmem.errors import ObsmemError as ObsmemError
from obsmem.errors import RecallNotFoundError as RecallNotFoundError
from obsmem.errors import ReflectionError as ReflectionError
from obsmem.errors import StorageError as StorageError
from obsmem.errors import ThreadNotFoundError as ThreadNotFoundError
from obsmem.memory import Memory as Memory
from obsmem.models.base import ChatModel as ChatModel
from obsmem.models.base import ModelRequest as ModelRequest
from obsmem.models.base import ModelResponse as ModelResponse
from obsmem.models.base import Usage as Usage
from obsmem.om.context import ContextWindow as ContextWindow
from obsmem.om.engine import CycleOutcome as CycleOutcome
from obsmem.om.extractors import Extractor as Extractor
from obsmem.om.offline import OfflineObserver as OfflineObserver
from obsmem.om.offline import OfflineReflector as OfflineReflector
from obsmem.om.protocols import Observer as Observer
from obsmem.om.protocols import Reflector as Reflector
from obsmem.om.recall.render import RecallResult as RecallResult
from obsmem.om.recall.tool import recall_tool_schema as recall_tool_schema
from obsmem.storage import Store as Store
from obsmem.storage import open_store as open_store
from obsmem.storage.contract import ObservationRecord as ObservationRecord
from obsmem.sync import SyncMemory as SyncMemory
from obsmem.tokens import TokenCounter as TokenCounter
from obsmem.turn import Turn as Turn
from obsmem.types import DataPart as DataPart
from obsmem.types import FilePart as FilePart
from obsmem.types import Message as Message
from obsmem.types import ReasoningPart as ReasoningPart
from obsmem.types import TextPart as TextPart
from obsmem.types import Thread as Thread
from obsmem.types import ToolCallPart as ToolCallPart
from obsmem.types import ToolResultPart as ToolResultPart

__version__ = "0.1.0"

__all__ = [
    "ChatModel",
    "ConfigError",
    "ContextWindow",
    "CycleOutcome",
    "DataPart",
    "Extractor",
    "FilePart",
    "InvalidInputError",
    "Memory",
    "MemoryConfig",
    "Message",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "NotFoundError",
    "ObservationConfig",
    "ObservationError",
    "ObservationRecord",
    "Observer",
    "ObsmemError",
    "OfflineObserver",
    "OfflineReflector",
    "ReasoningPart",
    "RecallNotFoundError",
    "RecallResult",
    "ReflectionConfig",
    "ReflectionError",
    "Reflector",
    "RetrievalConfig",
    "StorageError",
    "Store",
    "SyncMemory",
    "TextPart",
    "Thread",
    "ThreadNotFoundError",
    "TokenCounter",
    "ToolCallPart",
    "ToolResultPart",
    "Turn",
    "Usage",
    "__version__",
    "open_store",
    "recall_tool_schema",
]
