"""The one cattrs converter of agentrio, and the functions that use it.

Decoding is strict: a string field takes only a JSON string, an int field only a JSON
integer, a list only a JSON array, unknown keys are refused. Every problem, from
broken JSON to a wrong nested type, surfaces as a single `FrameDecodeError` naming the
field, so a server can answer any input with an ``error`` frame and go on.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs
import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union

from agentrio.protocol.errors import FrameDecodeError
from agentrio.protocol.events import EVENT_TYPES, Event
from agentrio.protocol.frames import (
    CLIENT_FRAME_TYPES,
    SERVER_FRAME_TYPES,
    ClientFrame,
    ServerFrame,
)
from agentrio.protocol.http import ConfirmRequest
from agentrio.protocol.legacy import upgrade_body, upgrade_frame

__all__ = [
    "MAX_MESSAGE_BYTES",
    "converter",
    "decode",
    "decode_client_frame",
    "decode_server_frame",
    "dumps",
    "encode",
    "format_problem",
    "install_strict_hooks",
    "structure",
    "unstructure",
]

T = TypeVar("T")

#: Largest WebSocket message or HTTP body accepted (SPEC §8).
MAX_MESSAGE_BYTES: Final = 1024 * 1024

converter = cattrs.Converter(forbid_extra_keys=True)


def _strict(kind: type, name: str) -> Callable[[Any, type], Any]:
    def hook(value: Any, _: type) -> Any:
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        raise TypeError(f"expected {name}, got {_json_kind(value)}")

    return hook


def _structure_float(value: Any, _: type) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"expected a number, got {_json_kind(value)}")


def _json_kind(value: Any) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "an array"
        case dict():
            return "an object"
    return type(value).__name__


def _is_list(t: Any) -> bool:
    return typing.get_origin(t) is list


def _is_str_dict(t: Any) -> bool:
    return typing.get_origin(t) is dict


def _list_hook_factory(conv: cattrs.Converter, t: Any) -> Callable[[Any, Any], list[Any]]:
    (item,) = typing.get_args(t) or (Any,)
    item_hook = conv.get_structure_hook(item) if item is not Any else None

    def hook(value: Any, _: Any) -> list[Any]:
        if not isinstance(value, list):
            raise TypeError(f"expected an array, got {_json_kind(value)}")
        if item_hook is None:
            return list(value)
        errors: list[Exception] = []
        out: list[Any] = []
        for index, element in enumerate(value):
            try:
                out.append(item_hook(element, item))
            except Exception as exc:
                note = IterableValidationNote(f"Structuring {t!r} @ index {index}", index, item)
                exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {t!r}", errors, t)
        return out

    return hook


def _dict_hook_factory(t: Any) -> Callable[[Any, Any], dict[str, Any]]:
    def hook(value: Any, _: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {_json_kind(value)}")
        return dict(value)

    return hook


def _is_literal(t: Any) -> bool:
    return typing.get_origin(t) is typing.Literal


def _literal_hook_factory(t: Any) -> Callable[[Any, Any], Any]:
    allowed = typing.get_args(t)

    def hook(value: Any, _: Any) -> Any:
        if isinstance(value, str) and value in allowed:
            return value
        raise ValueError("must be one of " + ", ".join(repr(a) for a in allowed))

    return hook


def _structure_str_enum(value: Any, t: type[enum.StrEnum]) -> Any:
    """A string enum (`agentrio.protocol.causes.Cause`) from its value. Registered for
    `enum.StrEnum`, which comes before ``str`` in such an enum's MRO: else the strict
    ``str`` hook would take it (an enum of ``str`` is a ``str``) and pass the bare
    string on."""
    allowed = [member.value for member in t]
    if isinstance(value, str) and value in allowed:
        return t(value)
    raise ValueError("must be one of " + ", ".join(repr(a) for a in allowed))


def install_strict_hooks(conv: cattrs.Converter) -> None:
    """Make ``conv`` take JSON/TOML types as they are: no ``str(5)``, no ``int("5")``,
    no list from a string. Used by the frame converter and the config converter."""
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(bool, _strict(bool, "a boolean"))
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook_factory(_is_literal, _literal_hook_factory)
    conv.register_structure_hook(enum.StrEnum, _structure_str_enum)
    conv.register_structure_hook_factory(_is_list, lambda t: _list_hook_factory(conv, t))
    conv.register_structure_hook_factory(_is_str_dict, _dict_hook_factory)


install_strict_hooks(converter)


def _tag(cls: type) -> str:
    tag = getattr(cls, "KIND", None) or getattr(cls, "TYPE", None)
    assert isinstance(tag, str), cls
    return tag


_unions_ready = False

#: Frame or event class → the function giving its JSON-ready dict, tag first.
_UNSTRUCTURERS: dict[type, Callable[[Any], dict[str, Any]]] = {}
#: Union (`ClientFrame`, `ServerFrame`, `Event`) → tag → the member's structure hook.
_MEMBER_HOOKS: dict[Any, dict[str, Callable[[dict[str, Any]], Any]]] = {}


def _ensure_unions() -> None:
    """Register the tagged unions on first use, not at import.

    Registering makes cattrs generate a hook for every frame and event class, which
    is most of this module's import time; a daemon answers ``/v1/health`` before it
    ever needs them (cold start, bench B7).

    It also builds the per-class fast paths of `unstructure` and `structure`: the same
    cattrs hooks the unions dispatch to, called directly, so encoding or decoding a
    frame skips the converter's dispatch, the union's dict copy and the re-ordering
    of the tag (bench B1 does four of these per ask).
    """
    global _unions_ready
    if _unions_ready:
        return
    configure_tagged_union(Event, converter, tag_generator=_tag, tag_name="kind")
    configure_tagged_union(ClientFrame, converter, tag_generator=_tag, tag_name="type")
    configure_tagged_union(ServerFrame, converter, tag_generator=_tag, tag_name="type")
    for union, members, tag_name in (
        (Event, EVENT_TYPES, "kind"),
        (ClientFrame, CLIENT_FRAME_TYPES, "type"),
        (ServerFrame, SERVER_FRAME_TYPES, "type"),
    ):
        hooks = _MEMBER_HOOKS.setdefault(union, {})
        for cls in members:
            hooks[_tag(cls)] = _member_structurer(cls)
            _UNSTRUCTURERS[cls] = _tagged_unstructurer(cls, tag_name)
    _unions_ready = True


def _member_structurer(cls: type) -> Callable[[dict[str, Any]], Any]:
    """Structure a member of a union from its dict, tag included: the generated
    fast path (`_fast_structurer`) when it takes the input, else cattrs on a copy
    without the tag — which gives the value, or the error, the union's hook gives."""
    hook = converter.get_structure_hook(cls)
    fast = _fast_structurer(cls)
    tag_name = "kind" if cls in EVENT_TYPES else "type"

    def structure_member(data: dict[str, Any]) -> Any:
        if fast is not None:
            result = fast(data)
            if result is not _MISS:
                return result
        rest = dict(data)
        del rest[tag_name]
        return hook(rest, cls)

    return structure_member


#: What a generated fast path returns for input it does not take as it is.
_MISS: Final = object()


def _inline_check(t: Any, allowed: str) -> tuple[str, str, frozenset[str] | None] | None:
    """For a field type whose strict structuring can be written inline: a test that
    is true for a value cattrs would *not* take as it is, the expression of the
    structured value (``v`` is the JSON value), and for a ``Literal`` the set of its
    values, which the test reads as ``allowed``. None for other types."""
    if t is str or t is bool or t is int:
        return f"type(v) is not {t.__name__}", "v", None
    if t is float:
        return "type(v) is not float and type(v) is not int", "float(v)", None
    if typing.get_origin(t) is typing.Literal:
        literals = typing.get_args(t)
        if all(isinstance(literal, str) for literal in literals):
            return f"type(v) is not str or v not in {allowed}", "v", frozenset(literals)
        return None
    if t == list[str]:
        return "type(v) is not list or not all(type(x) is str for x in v)", "list(v)", None
    if t == dict[str, Any]:
        return "type(v) is not dict", "dict(v)", None
    args = typing.get_args(t)
    union = typing.get_origin(t) in (typing.Union, types.UnionType)
    if union and len(args) == 2 and type(None) in args:
        (inner,) = (arg for arg in args if arg is not type(None))
        check = _inline_check(inner, allowed)
        if check is not None:
            test, value, values = check
            if value != "v":
                value = f"None if v is None else {value}"
            return f"v is not None and ({test})", value, values
    return None


def _fast_fields(cls: type) -> tuple[attrs.Attribute[Any], ...] | None:
    """``cls``'s attrs fields, resolved; None when the generated paths would not match
    cattrs' (a private or aliased field, one left out of ``__init__``)."""
    attrs.resolve_types(cls)
    fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(cls)
    if any(f.alias != f.name or not f.init or f.name.startswith("_") for f in fields):
        return None
    return fields


def _fast_structurer(cls: type) -> Callable[[dict[str, Any]], Any] | None:
    """Generate a function that structures ``cls`` from its tagged dict in one pass,
    checking the common field types inline (a cattrs hook does each through a call),
    or returns `_MISS` at the first thing it does not take as it is — an unknown key,
    a missing field, a wrong type, a constructor error — so the caller lets cattrs
    produce the same value or the exact error (R71). Fields of other types (nested
    classes, events) go through their cattrs hooks."""
    fields = _fast_fields(cls)
    if fields is None:
        return None
    tag_name = "kind" if cls in EVENT_TYPES else "type"
    namespace: dict[str, Any] = {
        "_cls": cls,
        "_MISS": _MISS,
        "_keys": frozenset([tag_name, *(f.name for f in fields)]),
    }
    lines = [
        "def fast_structure(o):",
        "    if not _keys.issuperset(o): return _MISS",
        "    kw = {}",
    ]
    for f in fields:
        required = f.default is attrs.NOTHING
        lines.append(f"    if {f.name!r} in o:")
        lines.append(f"        v = o[{f.name!r}]")
        check = _inline_check(f.type, f"_l_{f.name}")
        if check is not None:
            test, value, namespace[f"_l_{f.name}"] = check
            lines.append(f"        if {test}: return _MISS")
            lines.append(f"        kw[{f.name!r}] = {value}")
        else:
            namespace[f"_h_{f.name}"] = converter.get_structure_hook(f.type)
            namespace[f"_t_{f.name}"] = f.type
            lines.append("        try:")
            lines.append(f"            kw[{f.name!r}] = _h_{f.name}(v, _t_{f.name})")
            lines.append("        except Exception: return _MISS")
        if required:
            lines.append("    else: return _MISS")
    lines += ["    try: return _cls(**kw)", "    except Exception: return _MISS"]
    exec(compile("\n".join(lines), f"<agentrio fast structure {cls.__name__}>", "exec"), namespace)
    fast: Callable[[dict[str, Any]], Any] = namespace["fast_structure"]
    return fast


def _tagged_unstructurer(cls: type, tag_name: str) -> Callable[[Any], dict[str, Any]]:
    """Generate ``cls``'s unstructure function: a dict literal, the tag first, then the
    fields in declaration order. JSON-native fields (`_inline_check` types) are read
    as they are, lists copied; other fields use their cattrs hooks, except an event
    (the ``event`` field of an ``event`` frame), which gets its own tag first. Fields
    marked `OMIT_DEFAULT` are added after the others, and only when they differ from
    their default."""
    fields = _fast_fields(cls)
    tag = _tag(cls)
    if fields is None:
        hook = converter.get_unstructure_hook(cls)
        return lambda value: {tag_name: tag, **hook(value)}
    namespace: dict[str, Any] = {"_event": _unstructure_event}
    items = [f"{tag_name!r}: {tag!r}"]
    optional: list[str] = []
    for f in fields:
        expression = _field_expression(f, namespace)
        if _omitted_by_default(f):
            default: Any = f.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]  # factory=list
                default = default.factory()
            namespace[f"_d_{f.name}"] = default
            optional.append(f"    if v.{f.name} != _d_{f.name}: d[{f.name!r}] = {expression}")
        else:
            items.append(f"{f.name!r}: {expression}")
    head = ["def fast_unstructure(v):", "    d = {" + ", ".join(items) + "}"]
    source = "\n".join([*head, *optional, "    return d"])
    exec(compile(source, f"<agentrio fast unstructure {cls.__name__}>", "exec"), namespace)
    fast: Callable[[Any], dict[str, Any]] = namespace["fast_unstructure"]
    return fast


def _field_expression(f: attrs.Attribute[Any], namespace: dict[str, Any]) -> str:
    """The expression reading field ``f`` of ``v`` in its JSON-ready form."""
    read = f"v.{f.name}"
    if f.type == list[str]:
        return f"list({read})"
    if f.type == list[str] | None:
        return f"None if {read} is None else list({read})"
    if typing.cast(Any, f.type) == Event:
        return f"_event({read})"
    if _inline_check(f.type, "") is not None and f.type != dict[str, Any]:
        return read
    namespace[f"_h_{f.name}"] = converter.get_unstructure_hook(f.type)
    return f"_h_{f.name}({read})"


def _omitted_by_default(f: attrs.Attribute[Any]) -> bool:
    return bool(f.metadata.get("omit_if_default")) and f.default is not attrs.NOTHING


def _has_omitted_fields(cls: Any) -> bool:
    return (
        isinstance(cls, type)
        and attrs.has(cls)
        and any(_omitted_by_default(f) for f in attrs.fields(cls))
    )


def _omitting_hook(cls: Any) -> Callable[[Any], dict[str, Any]]:
    """cattrs' own hook for a class with `OMIT_DEFAULT` fields (the tagged unions'
    hooks use it), so both paths leave the same fields out."""
    overrides: dict[str, Any] = {
        f.name: override(omit_if_default=True) for f in attrs.fields(cls) if _omitted_by_default(f)
    }
    hook: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, converter, **overrides)
    return hook


converter.register_unstructure_hook_factory(_has_omitted_fields, _omitting_hook)


def _unstructure_event(event: Any) -> dict[str, Any]:
    tagged = _UNSTRUCTURERS.get(type(event))
    if tagged is not None:
        return tagged(event)
    return _tag_first(converter.unstructure(event, Event), "kind")


_EVENT_TAGS: Final = frozenset(_tag(c) for c in EVENT_TYPES)
_CLIENT_TAGS: Final = frozenset(_tag(c) for c in CLIENT_FRAME_TYPES)
_SERVER_TAGS: Final = frozenset(_tag(c) for c in SERVER_FRAME_TYPES)


def _tag_first(data: dict[str, Any], name: str) -> dict[str, Any]:
    return {name: data.pop(name), **data}


_UNIONS: Final = (Event, ClientFrame, ServerFrame)
_UNION_MEMBERS: Final = frozenset((*EVENT_TYPES, *CLIENT_FRAME_TYPES, *SERVER_FRAME_TYPES))


def _type_needs_unions(t: Any) -> bool:
    """Whether (un)structuring ``t`` involves a frame, an event or one of their unions.

    Only those need `_ensure_unions`; an HTTP body such as ``Health`` does not, so the
    first ``/v1/health`` of a starting daemon does not pay for generating every frame
    and event hook (about 0.1 s; cold start, bench B7)."""
    if t in _UNIONS:
        return True
    args = typing.get_args(t)
    if args:
        return any(_type_needs_unions(a) for a in args)
    return isinstance(t, type) and _class_needs_unions(t)


_NEEDS_UNIONS: dict[type, bool] = {}


def _class_needs_unions(cls: type) -> bool:
    found = _NEEDS_UNIONS.get(cls)
    if found is None:
        if cls in _UNION_MEMBERS:
            found = True
        elif attrs.has(cls):
            attrs.resolve_types(cls)
            found = any(_type_needs_unions(field.type) for field in attrs.fields(cls))
        else:
            found = False
        _NEEDS_UNIONS[cls] = found
    return found


def unstructure(value: Any) -> Any:
    """The JSON-ready form of a frame, event or body; the tag (``type`` of a frame,
    ``kind`` of an event) comes first so logs read naturally."""
    if not _unions_ready and _class_needs_unions(type(value)):
        _ensure_unions()
    tagged = _UNSTRUCTURERS.get(type(value))
    if tagged is not None:
        return tagged(value)
    return converter.unstructure(value)


#: One encoder for every `dumps` (``json.dumps`` with options builds one per call).
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON text of `unstructure` (``ensure_ascii`` off: UTF-8 on the wire)."""
    return _ENCODER.encode(unstructure(value))


encode = dumps


def _check_tags(value: Any, cls: Any) -> None:
    """Reject a missing or unknown tag with a message naming it, before cattrs runs."""
    if cls is ClientFrame or cls is ServerFrame:
        tags, name, what = (
            (_CLIENT_TAGS if cls is ClientFrame else _SERVER_TAGS),
            "type",
            "frame type",
        )
    elif cls is Event:
        tags, name, what = _EVENT_TAGS, "kind", "event kind"
    else:
        return
    if not isinstance(value, dict):
        raise FrameDecodeError("$", f"expected an object, got {_json_kind(value)}")
    tag = value.get(name)
    if tag is None:
        raise FrameDecodeError(f"$.{name}", "required field missing")
    if not isinstance(tag, str) or tag not in tags:
        raise FrameDecodeError(f"$.{name}", f"unknown {what} {tag!r}")
    if cls is ServerFrame and tag == "event" and "event" in value:
        try:
            _check_tags(value["event"], Event)
        except FrameDecodeError as exc:
            raise FrameDecodeError("$.event" + exc.field[1:], exc.problem) from None


def structure(value: Any, cls: type[T] | Any) -> T:
    """Structure an already-parsed JSON value into ``cls``; raise `FrameDecodeError`."""
    if not _unions_ready and _type_needs_unions(cls):
        _ensure_unions()
    if cls is ClientFrame:
        value = upgrade_frame(value)
    elif cls is ConfirmRequest:
        value = upgrade_body(value)
    _check_tags(value, cls)
    members = _MEMBER_HOOKS.get(cls)
    try:
        if members is not None:
            # What the union's own hook does, minus the converter's dispatch: the tag
            # is known to be valid (`_check_tags`), the member's structurer does the rest.
            result: T = members[value["kind" if cls is Event else "type"]](value)
            return result
        if attrs.has(cls) and not isinstance(value, dict):
            raise FrameDecodeError("$", f"expected an object, got {_json_kind(value)}")
        result = converter.structure(value, cls)
        return result
    except FrameDecodeError:
        raise
    except Exception as exc:  # cattrs raises many kinds; all mean "bad input"
        raise _describe(exc) from None


def decode(data: str | bytes, cls: type[T] | Any) -> T:
    """Parse JSON text into ``cls`` (a frame union, an event or a body class)."""
    size = len(data.encode()) if isinstance(data, str) else len(data)
    if size > MAX_MESSAGE_BYTES:
        raise FrameDecodeError("$", f"message larger than {MAX_MESSAGE_BYTES} bytes")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FrameDecodeError("$", f"invalid JSON ({exc})") from None
    result: T = structure(value, cls)
    return result


def decode_client_frame(data: str | bytes) -> ClientFrame:
    frame: ClientFrame = decode(data, ClientFrame)
    return frame


def decode_server_frame(data: str | bytes) -> ServerFrame:
    frame: ServerFrame = decode(data, ServerFrame)
    return frame


def format_problem(exc: BaseException, type_: type | None) -> str:
    """Say what is wrong with one value, in words a client author can act on."""
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, TypeError) and str(exc).startswith("expected "):
        return str(exc)
    if isinstance(exc, ValueError) and str(exc).startswith("must be one of"):
        return str(exc)
    return cattrs.v.format_exception(exc, type_)


def _named_problem(exc: BaseException) -> FrameDecodeError | None:
    if isinstance(exc, FrameDecodeError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _named_problem(inner)
        if found is not None:
            return found
    return None


def _describe(exc: Exception) -> FrameDecodeError:
    """Turn a cattrs validation error into one message naming the first bad field (a
    validator that already named it, `agentrio.protocol.causes.person_cause`, is kept)."""
    named = _named_problem(exc)
    if named is not None:
        return named
    if isinstance(exc, (cattrs.ClassValidationError, cattrs.IterableValidationError)):
        messages = cattrs.transform_error(exc, path="$", format_exception=format_problem)
        if messages:
            problem, _, path = messages[0].rpartition(" @ ")
            return FrameDecodeError(path or "$", problem or messages[0])
    if isinstance(exc, KeyError):
        return FrameDecodeError("$", f"unknown tag {exc}")
    return FrameDecodeError("$", str(exc) or type(exc).__name__)
