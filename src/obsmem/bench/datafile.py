"""Reading a benchmark's JSON file from the path the user gave, with errors that say which."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from obsmem.errors import InvalidInputError

__all__ = ["read_json_list"]


def read_json_list(path: Path, dataset: str, items: str) -> list[Any]:
    """The JSON list in ``path``; a missing file, bad JSON or another shape is an InvalidInputError."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidInputError(f"{dataset} file {path} does not exist; pass --data PATH") from exc
    except IsADirectoryError as exc:
        raise InvalidInputError(f"{dataset} path {path} is a folder; pass the JSON file in it") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{dataset} file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise InvalidInputError(f"{dataset} file {path} cannot be read: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{dataset} file {path} is not valid JSON: {exc}") from exc
    except RecursionError:  # nested past Python's limit: no dataset is
        raise InvalidInputError(f"{dataset} file {path} is not valid JSON: nested too deeply") from None
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise InvalidInputError(f"{dataset} file {path} must hold a JSON list of {items} (JSON objects)")
    return raw
