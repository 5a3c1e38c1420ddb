"""Typed reads of a JSON object that came from a file, each refusal naming the file, the key and the value.

A report written by the harness is read back by ``from_json`` methods (model/bisect_report.py, model/culprit.py);
what they read may come from elsewhere (``report --merge``), so every field is checked for its type here, in one
place, and a wrong one is a ConfigError that says which file, which key, what it held and what would be right.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from reprobisect.errors import ConfigError

__all__ = ["JsonObject"]

_Item = TypeVar("_Item")


class JsonObject:
    """Typed reads of one JSON object, each refusal naming the file (``where``), the key and the value."""

    def __init__(self, data: object, where: str, what: str) -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: {what} must be a JSON object, not {type(data).__name__}")
        self.data: Mapping[object, object] = data
        self.where, self.what = where, what

    def refuse(self, key: str, value: object, expected: str) -> ConfigError:
        return ConfigError(f"{self.where}: {self.what} {key!r} is {value!r:.200}; expected {expected}")

    def text(self, key: str, expected: str = "a string") -> str:
        value = self.data.get(key)
        if not isinstance(value, str):
            raise self.refuse(key, value, expected)
        return value

    def maybe_text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            raise self.refuse(key, value, "a string or null")
        return value

    def count(self, key: str, default: int | None = None) -> int:
        value = self.data.get(key, default)
        if type(value) is not int or value < 0:
            raise self.refuse(key, value, "a count (an integer ≥ 0)")
        return value

    def flag(self, key: str, default: bool | None = None) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.refuse(key, value, "true or false")
        return value

    def texts(self, key: str, *, required: bool = True) -> tuple[str, ...]:
        value = self.data.get(key, None if required else [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.refuse(key, value, "a list of strings")
        return tuple(value)

    def objects(self, key: str, *, required: bool = True) -> list[object]:
        value = self.data.get(key, None if required else [])
        if not isinstance(value, list):
            raise self.refuse(key, value, "a list of objects")
        return value

    def text_map(self, key: str) -> dict[str, str]:
        value = self.data.get(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.refuse(key, value, "an object of package names to versions")
        return dict(value)

    def json_object(self, key: str) -> dict[str, object] | None:
        value = self.data.get(key)
        if value is not None and not (isinstance(value, Mapping) and all(isinstance(k, str) for k in value)):
            raise self.refuse(key, value, "an object or null")
        return None if value is None else dict(value)

    def each(self, key: str, make: Callable[[JsonObject], _Item], *, required: bool = True) -> tuple[_Item, ...]:
        """Each object of the list under ``key``, read by ``make``; its refusals name it: ``regions[2] 'rule'``."""
        items = self.objects(key, required=required)
        return tuple(make(JsonObject(item, self.where, f"{key}[{i}]")) for i, item in enumerate(items))

    def at(self, key: str) -> JsonObject:
        """The object under ``key``, its refusals named by the path to it: ``transitions[0] 'from' 'outcome'``."""
        return JsonObject(self.data.get(key), self.where, f"{self.what} {key!r}")
