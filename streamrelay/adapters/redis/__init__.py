"""The Redis backend for replicas (DESIGN §8): partition leases with fencing tokens, the input streams, the
journal and the ledger per partition, and rate budgets shared by every replica."""

from streamrelay.adapters.redis.budget import Attempt, RedisBudgets, SharedBucket, SharedPauses
from streamrelay.adapters.redis.client import (
    Durability,
    Persistence,
    connect,
    connect_sentinel,
    persistence,
    redacted,
)
from streamrelay.adapters.redis.epoch import Epochs
from streamrelay.adapters.redis.errors import (
    DataLostError,
    FencedError,
    NotDirectError,
    NotReplicatedError,
    StalePrimaryError,
)
from streamrelay.adapters.redis.journal import RedisJournal
from streamrelay.adapters.redis.keys import KEYS, KeySpace, conversation_key, partition_of
from streamrelay.adapters.redis.lease import Holder, LeaseChange, LeaseEvent, LeaseKeeper, Leases
from streamrelay.adapters.redis.ledger import RedisLedger
from streamrelay.adapters.redis.registry import ReplicaUrls, RunIndex
from streamrelay.adapters.redis.shared_budgets import RedisSharedBudgets, bot_scope, shared_budgets_for
from streamrelay.adapters.redis.stream import ClosedRun, DeadLetter, InputEntry, InputStream

__all__ = [
    "KEYS",
    "Attempt",
    "ClosedRun",
    "DataLostError",
    "DeadLetter",
    "Durability",
    "Epochs",
    "FencedError",
    "Holder",
    "InputEntry",
    "InputStream",
    "KeySpace",
    "LeaseChange",
    "LeaseEvent",
    "LeaseKeeper",
    "Leases",
    "NotDirectError",
    "NotReplicatedError",
    "Persistence",
    "RedisBudgets",
    "RedisJournal",
    "RedisLedger",
    "RedisSharedBudgets",
    "ReplicaUrls",
    "RunIndex",
    "SharedBucket",
    "SharedPauses",
    "StalePrimaryError",
    "bot_scope",
    "connect",
    "connect_sentinel",
    "conversation_key",
    "partition_of",
    "persistence",
    "redacted",
    "shared_budgets_for",
]
