"""rmqstore engine: a pure-Python (numpy + mmap) RocketMQ message store. No Qt here."""
from .config import StoreConfig
from .errors import (ConfigError, CorruptDataError, MessageRejectedError, NotAStoreError,
                     ReadOnlyStoreError, StoreError, StoreFullError, StoreLockedError)
from .message import Message
from .message_store import GetMessageResult, MessageStore, QueryResult

__version__ = "0.1.0"
__all__ = ["MessageStore", "StoreConfig", "Message", "GetMessageResult", "QueryResult", "StoreError",
           "NotAStoreError", "ConfigError", "CorruptDataError", "StoreLockedError", "ReadOnlyStoreError",
           "MessageRejectedError", "StoreFullError", "__version__"]
