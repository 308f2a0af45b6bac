"""obsmem: observational memory for LLM agents.

Old conversation is compressed by an Observer into dated observations, a Reflector condenses
them when they grow, and the actor sees the observations plus a raw tail of recent messages.

Everything public is re-exported here: :class:`Memory` and its configuration, the message
types, every error in :mod:`obsmem.errors`, and what a custom Observer or Reflector needs
(the protocols and their request/result types). The documented sub-packages are public too:
``obsmem.models`` (and ``obsmem.models.<vendor>``, ``obsmem.models.testing``),
``obsmem.embeddings``, ``obsmem.vectors``, ``obsmem.knowledge`` (and
``obsmem.knowledge.lifecycle``), ``obsmem.storage``, ``obsmem.clock`` (``FakeClock`` for replays
and tests) and ``obsmem.integrations.<framework>`` (each behind its extra). Every other module
path is an implementation detail.
"""

from obsmem.calls import UsageReport as UsageReport
from obsmem.calls import UsageRow as UsageRow
from obsmem.config import BudgetConfig as BudgetConfig
from obsmem.config import MemoryConfig as MemoryConfig
from obsmem.config import ModelPriceConfig as ModelPriceConfig
from obsmem.config import ObservationConfig as ObservationConfig
from obsmem.config import PrivacyConfig as PrivacyConfig
from obsmem.config import PrivacyOptions as PrivacyOptions
from obsmem.config import ReflectionConfig as ReflectionConfig
from obsmem.config import RetrievalConfig as RetrievalConfig
from obsmem.convert import from_anthropic as from_anthropic
from obsmem.convert import from_openai as from_openai
from obsmem.convert import from_openai_responses as from_openai_responses
from obsmem.convert import to_anthropic as to_anthropic
from obsmem.convert import to_openai as to_openai
from obsmem.convert import to_openai_responses as to_openai_responses
from obsmem.errors import CeilingExceededError as CeilingExceededError
from obsmem.errors import CeilingLoweredError as CeilingLoweredError
from obsmem.errors import ConfigError as ConfigError
from obsmem.errors import DegenerateOutputError as DegenerateOutputError
from obsmem.errors import DescriptionTooLongError as DescriptionTooLongError
from obsmem.errors import ExportFormatError as ExportFormatError
from obsmem.errors import KnowledgeReachError as KnowledgeReachError
from obsmem.errors import ExportVersionError as ExportVersionError
from obsmem.errors import ImportConflictError as ImportConflictError
from obsmem.errors import ImportUnsupportedError as ImportUnsupportedError
from obsmem.errors import IncompleteResponseError as IncompleteResponseError
from obsmem.errors import InvalidInputError as InvalidInputError
from obsmem.errors import InvalidMergeError as InvalidMergeError
from obsmem.errors import InvalidScopeError as InvalidScopeError
from obsmem.errors import InvalidWhenError as InvalidWhenError
from obsmem.errors import KnowledgeNotFoundError as KnowledgeNotFoundError
from obsmem.errors import LeaseLostError as LeaseLostError
from obsmem.errors import MessageNotFoundError as MessageNotFoundError
from obsmem.errors import MigrationError as MigrationError
from obsmem.errors import MissingCredentialsError as MissingCredentialsError
from obsmem.errors import ModelError as ModelError
from obsmem.errors import ModelOutputError as ModelOutputError
from obsmem.errors import ModelRequestError as ModelRequestError
from obsmem.errors import ModelUnavailableError as ModelUnavailableError
from obsmem.errors import NameConflictError as NameConflictError
from obsmem.errors import NotFoundError as NotFoundError
from obsmem.errors import ObservationError as ObservationError
from obsmem.errors import ObsmemError as ObsmemError
from obsmem.errors import OperationAbortedError as OperationAbortedError
from obsmem.errors import PrivacyError as PrivacyError
from obsmem.errors import RecallNotFoundError as RecallNotFoundError
from obsmem.errors import ReflectionError as ReflectionError
from obsmem.errors import ResponseTooLargeError as ResponseTooLargeError
from obsmem.errors import StaleSemanticIndexError as StaleSemanticIndexError
from obsmem.errors import StorageError as StorageError
from obsmem.errors import StoreClosedError as StoreClosedError
from obsmem.errors import ThreadChangedError as ThreadChangedError
from obsmem.errors import ThreadNotFoundError as ThreadNotFoundError
from obsmem.errors import TombstonedValueError as TombstonedValueError
from obsmem.errors import UnresolvedMentionError as UnresolvedMentionError
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
from obsmem.om.outcomes import EngineEvent as EngineEvent
from obsmem.om.protocols import AttemptFailed as AttemptFailed
from obsmem.om.protocols import ObservationRequest as ObservationRequest
from obsmem.om.protocols import ObservationResult as ObservationResult
from obsmem.om.protocols import Observer as Observer
from obsmem.om.protocols import ReflectionRequest as ReflectionRequest
from obsmem.om.protocols import ReflectionResult as ReflectionResult
from obsmem.om.protocols import Reflector as Reflector
from obsmem.om.recall.render import RecallResult as RecallResult
from obsmem.om.recall.tool import recall_tool_schema as recall_tool_schema
from obsmem.om.text.groups import ObservationGroup as ObservationGroup
from obsmem.om.text.groups import parse_groups as parse_groups
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
    "AttemptFailed",
    "BudgetConfig",
    "CeilingExceededError",
    "CeilingLoweredError",
    "ChatModel",
    "ConfigError",
    "ContextWindow",
    "CycleOutcome",
    "DataPart",
    "DegenerateOutputError",
    "DescriptionTooLongError",
    "EngineEvent",
    "ExportFormatError",
    "ExportVersionError",
    "Extractor",
    "FilePart",
    "ImportConflictError",
    "ImportUnsupportedError",
    "IncompleteResponseError",
    "InvalidInputError",
    "InvalidMergeError",
    "InvalidScopeError",
    "InvalidWhenError",
    "KnowledgeNotFoundError",
    "KnowledgeReachError",
    "LeaseLostError",
    "Memory",
    "MemoryConfig",
    "Message",
    "MessageNotFoundError",
    "MigrationError",
    "MissingCredentialsError",
    "ModelError",
    "ModelOutputError",
    "ModelPriceConfig",
    "ModelRequest",
    "ModelRequestError",
    "ModelResponse",
    "ModelUnavailableError",
    "NameConflictError",
    "NotFoundError",
    "ObservationConfig",
    "ObservationError",
    "ObservationGroup",
    "ObservationRecord",
    "ObservationRequest",
    "ObservationResult",
    "Observer",
    "ObsmemError",
    "OfflineObserver",
    "OfflineReflector",
    "OperationAbortedError",
    "PrivacyConfig",
    "PrivacyError",
    "PrivacyOptions",
    "ReasoningPart",
    "RecallNotFoundError",
    "RecallResult",
    "ReflectionConfig",
    "ReflectionError",
    "ReflectionRequest",
    "ReflectionResult",
    "Reflector",
    "ResponseTooLargeError",
    "RetrievalConfig",
    "StaleSemanticIndexError",
    "StorageError",
    "Store",
    "StoreClosedError",
    "SyncMemory",
    "TextPart",
    "Thread",
    "ThreadChangedError",
    "ThreadNotFoundError",
    "TokenCounter",
    "TombstonedValueError",
    "ToolCallPart",
    "ToolResultPart",
    "Turn",
    "UnresolvedMentionError",
    "Usage",
    "UsageReport",
    "UsageRow",
    "__version__",
    "from_anthropic",
    "from_openai",
    "from_openai_responses",
    "open_store",
    "parse_groups",
    "recall_tool_schema",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
]
