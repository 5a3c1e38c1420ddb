"""Each command-line option declared once, as the field of the typed options object it fills (issue #53, item 1).

The way nox declares its options (``nox/_options.py``): one declaration carries the flag, its type and default, its
help and its group, and the parser, the typed options object and the ``--help`` all come from it. Here that
declaration is a ``Flag`` (the flag and how argparse reads it, declared once, in the module of the group or the
command that owns it) made a field of a frozen options dataclass with ``option(FLAG, help=...)``:

    jobs: int = option(JOBS, help="runs at a time")

``add_fields(parser, Options)`` adds the class's declared fields to a parser in the order the class lists them
(argparse lists options in the order they were added, so a command's ``--help`` keeps its order), and
``read_fields(Options, args, **given)`` builds the object: each declared field from its parsed value (through the
flag's ``read``, which turns what argparse gives into the field's type: a list into a tuple, a checked pin), a
group of options declared elsewhere (``composed(add, read)``: ``ScriptOptions``, ``CommonOptions``) where its field
stands, and the others (a value made of several flags) given. A flag several commands take with the
same meaning is one ``Flag`` in a shared module; its help may differ per command, being the field's. One spelling
with two meanings in two commands (``bisect --good REV`` and ``minimize --good PACKAGE==VERSION ...``) is two
flags of different kinds; tests/unit/test_declared_options.py checks that no flag is declared twice otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

__all__ = ["Flag", "add_fields", "as_tuple", "composed", "declared_flags", "option", "read_fields"]

_KEY = "reprobisect.flag"
_GROUP_KEY = "reprobisect.group"
_Options = TypeVar("_Options")


def _same(value: Any) -> Any:
    return value


def as_tuple(value: Any) -> tuple[Any, ...]:
    """A repeatable flag's values as a tuple; not given (None) is ``()``."""
    return tuple(value or ())


@dataclasses.dataclass(frozen=True)
class Flag:
    """One option as argparse reads it: its spelling (``--jobs``, or ``-k`` and ``--keep``), what argparse is told
    besides (``type``, ``choices``, ``action``, ``metavar``, ``required``, ...), the default (the options object's
    too) and ``read``, how the parsed value becomes the field's (``tuple`` for a repeatable flag)."""

    names: tuple[str, ...]
    default: Any = None
    read: Callable[[Any], Any] = _same
    given: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # argparse's own keywords
    default_from: Callable[[], Any] | None = None  # a default that depends on where it runs (an env variable, cwd)

    @classmethod
    def of(
        cls,
        *names: str,
        default: Any = None,
        read: Callable[[Any], Any] = _same,
        default_from: Callable[[], Any] | None = None,
        **argparse_kwargs: Any,
    ) -> Flag:
        """``Flag.of("--jobs", type=..., default=1)``: the spelling first, then argparse's own keywords. A switch
        (``store_true``, ``store_false``) defaults to what argparse gives when it is not given; ``default_from``
        makes the default each time a parser is made (its field then has none: the parser always gives it)."""
        switch = {"store_true": False, "store_false": True}.get(argparse_kwargs.get("action", ""))
        if switch is not None and default is None:
            default = switch
        return cls(names=names, default=default, read=read, given=argparse_kwargs, default_from=default_from)

    @property
    def name(self) -> str:
        """The long spelling, as errors and tests name it."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup, dest: str, help: str | None) -> None:
        """Add this flag to ``parser``, its value at ``dest``."""
        kwargs = dict(self.given)
        if kwargs.get("action", "store") in ("store", "append"):
            kwargs["default"] = self.default if self.default_from is None else self.default_from()
        if not self.names[0].startswith("-"):  # a positional argument: argparse names it by its one name
            parser.add_argument(*self.names, help=help, **kwargs)
            return
        parser.add_argument(*self.names, dest=dest, help=help, **kwargs)


@dataclasses.dataclass(frozen=True)
class _Field:
    flag: Flag
    help: str | None
    group: str | tuple[str, str] | None  # a title, or (title, description)
    dest: str | None  # where argparse keeps it, when not the field's name (its metavar follows it: --fix FIX)
    exclusive: str | None  # the options of one name here exclude each other (argparse's mutually exclusive group)


def option(
    flag: Flag,
    *,
    help: str | None,
    group: str | tuple[str, str] | None = None,
    dest: str | None = None,
    exclusive: str | None = None,
) -> Any:
    """A dataclass field filled from ``flag``: ``help`` is what this command's ``--help`` says of it, ``group`` the
    title of the argument group it is listed under, or its title and description (None: the command's own options;
    a group's description is said by its first field), ``dest`` where argparse keeps the value when not under the
    field's name, ``exclusive`` a name the fields that exclude each other share. Its default is the flag's, through
    its ``read``."""
    metadata = {_KEY: _Field(flag=flag, help=help, group=group, dest=dest, exclusive=exclusive)}
    positional = not flag.names[0].startswith("-") and flag.given.get("nargs") not in ("?", "*")
    if flag.given.get("required") or positional or flag.default_from is not None:
        return dataclasses.field(metadata=metadata)  # no default: the command line always gives it
    if isinstance(flag.default, list | dict | set):  # read anew for each object: never one list shared
        return dataclasses.field(default_factory=lambda: flag.read(list(flag.default)), metadata=metadata)
    return dataclasses.field(default=flag.read(flag.default), metadata=metadata)


def composed(
    add: Callable[[argparse.ArgumentParser], None],
    read: Callable[[argparse.Namespace], Any],
    default: Callable[[], Any] | None = None,
) -> Any:
    """A field that is a group of options declared elsewhere (``ScriptOptions``, ``CommonOptions``, ...): ``add``
    adds them to the parser where the field stands in its class, ``read`` makes the field's value of the parsed
    command line; ``default`` makes it where the object is built by hand (none: it must be given)."""
    metadata = {_GROUP_KEY: _Composed(add=add, read=read)}
    if default is None:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default_factory=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class _Composed:
    add: Callable[[argparse.ArgumentParser], None]
    read: Callable[[argparse.Namespace], Any]


def _declared(cls: type) -> list[tuple[str, _Field]]:
    return [(f.name, f.metadata[_KEY]) for f in dataclasses.fields(cls) if _KEY in f.metadata]


def declared_flags(cls: type) -> dict[str, Flag]:
    """The flags ``cls``'s fields are filled from, by field name."""
    return {name: declared.flag for name, declared in _declared(cls)}


def add_fields(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    skip: Collection[str] = (),
    help: Mapping[str, str] | None = None,
) -> None:
    """Add the flags of ``cls``'s declared fields to ``parser``, in the class's order, each under its group (made
    once, by title); ``skip``: fields this command does not take; ``help``: a field's help replaced for this
    command, by field name."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        if _GROUP_KEY in field.metadata:
            field.metadata[_GROUP_KEY].add(parser)
            continue
        if _KEY not in field.metadata:
            continue
        declared: _Field = field.metadata[_KEY]
        target: argparse.ArgumentParser | argparse._ArgumentGroup = parser
        if declared.group is not None:
            title, description = declared.group if isinstance(declared.group, tuple) else (declared.group, None)
            if title not in groups:
                groups[title] = parser.add_argument_group(title, description)
            target = groups[title]
        if declared.exclusive is not None:
            if declared.exclusive not in exclusive:
                exclusive[declared.exclusive] = target.add_mutually_exclusive_group()
            target = exclusive[declared.exclusive]
        declared.flag.add_to(target, declared.dest or field.name, (help or {}).get(field.name, declared.help))


def read_fields(cls: type[_Options], args: argparse.Namespace, **given: Any) -> _Options:
    """An instance of ``cls``: each declared field from ``args`` through its flag's ``read`` (a field whose flag this
    command does not take keeps its default), each composed group by its ``read``, every other field from
    ``given``."""
    values = dict(given)
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in values:
            continue
        if _GROUP_KEY in field.metadata:
            values[field.name] = field.metadata[_GROUP_KEY].read(args)
        elif _KEY in field.metadata:
            declared: _Field = field.metadata[_KEY]
            dest = declared.dest or field.name
            if hasattr(args, dest):
                values[field.name] = declared.flag.read(getattr(args, dest))
    return cls(**values)
