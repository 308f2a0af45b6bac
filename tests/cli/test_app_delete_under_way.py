"""``obsmem delete-resource alice`` run while the application itself was deleting alice
(``Memory.delete_resource``, its threads' rows gone, the rest not yet) said it had "finished the
delete of 2 threads cut off earlier (its process stopped midway)" and ran a second delete beside
the live one: only the CLI's and the REST API's deletes marked themselves under way (7e635ac).
``Memory``'s deletes now do, so every delete does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_delete_under_way_117 import cli_beside_a_delete_under_way

pytestmark = pytest.mark.anyio


async def test_an_applications_delete_under_way_is_not_called_cut_off(tmp_path: Path) -> None:
    await cli_beside_a_delete_under_way(tmp_path, "app")
