"""Message ids for what a framework hands over with an id of its own.

A framework's message id (LangChain's ``AIMessage.id``, Agent Framework's ``message_id``) often
comes from the model server (``chatcmpl-…``): nothing keeps it unique, across threads or even
within one (a server may repeat it). obsmem's message ids are unique in a store, so such an id
is never used as it is: :func:`scoped_id` derives one from the thread, the framework's id and
the message's content. The same message sent again (a framework re-sending its history) gets
the same id, so it is stored once; another message with a repeated id, or the same id in
another thread, gets another.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["scoped_id"]


def scoped_id(framework: str, thread_id: str, framework_id: str, content: Any) -> str:
    """obsmem's id for the message ``framework_id`` of ``framework`` in ``thread_id`` whose
    content (anything JSON can write, keys sorted; other values by ``str``) is ``content``."""
    body = json.dumps(
        [framework, thread_id, framework_id, content], sort_keys=True, default=str, ensure_ascii=False
    )
    return f"msg_{hashlib.sha256(body.encode('utf-8')).hexdigest()[:32]}"
