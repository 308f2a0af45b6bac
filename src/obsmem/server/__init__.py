"""``obsmem serve``: observational memory as a service (needs the ``server`` extra).

:func:`create_app` builds the FastAPI app over a :class:`Service` (one Memory, its API keys, an
optional knowledge store, the gateway's upstream); :mod:`obsmem.server.keys` holds the keys.
"""

from obsmem.server.app import create_app
from obsmem.server.keys import ApiKey, KeyStore, key_store_for
from obsmem.server.service import ServerSettings, Service

__all__ = ["ApiKey", "KeyStore", "ServerSettings", "Service", "create_app", "key_store_for"]
