"""The store: SQLAlchemy models, engines, and Alembic-driven schema changes."""

from sextant.store.engine import make_engine, session_factory, utcnow
from sextant.store.models import (
    PAGE_STATES,
    Base,
    Capsule,
    CertificateEvent,
    ExclusionSweep,
    FetchAttempt,
    FrontierEntry,
    Link,
    OperatorExclusion,
    Page,
    Run,
    SeedRequest,
    UserRobots,
)

__all__ = [
    "PAGE_STATES",
    "Base",
    "Capsule",
    "CertificateEvent",
    "ExclusionSweep",
    "FetchAttempt",
    "FrontierEntry",
    "Link",
    "OperatorExclusion",
    "Page",
    "Run",
    "SeedRequest",
    "UserRobots",
    "make_engine",
    "session_factory",
    "utcnow",
]
