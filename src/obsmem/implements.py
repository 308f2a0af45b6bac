"""Whether an object provides a protocol: :func:`implements`.

obsmem takes its ports as protocols (a ``Store``, a ``ChatModel``, an ``Embedder``...), so an
application can hand it anything with the right methods, a delegating wrapper among them (one
that logs, meters or audits every call and forwards the rest with ``__getattr__``). Python 3.11's
``isinstance`` against a ``runtime_checkable`` protocol looked the members up as ``hasattr`` does,
and such a wrapper passed; from Python 3.12 on it looks them up statically
(``inspect.getattr_static``), which never calls ``__getattr__``, so the same wrapper is refused
("expected a Store, got ..."). :func:`implements` answers as 3.11 did, on every version.
"""

from __future__ import annotations

from typing import Any

__all__ = ["implements"]


def implements(value: object, protocol: Any) -> bool:
    """Whether ``value`` has every member of the ``runtime_checkable`` ``protocol``: its
    ``isinstance``, or (for what only ``__getattr__`` provides) each member found by ``hasattr``.
    (``protocol`` is typed ``Any``: a type checker takes no protocol class where a ``type`` goes.)"""
    if isinstance(value, protocol):
        return True
    members: Any = getattr(protocol, "__protocol_attrs__", None)  # Python 3.12+ (3.11: isinstance decided)
    return bool(members) and all(hasattr(value, name) for name in members)
