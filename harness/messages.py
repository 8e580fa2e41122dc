"""Chat messages as types: what every agent builds and every provider takes.

A message is a plain dict typed as a `TypedDict` (a union over its role), so a family's dict
literal type-checks as it is and a message's JSON (the cache key, a record) is the dict itself.
A user turn's content is a string or a list of parts (text, and images as base64 PNG); an
assistant turn may carry tool calls (name and parsed arguments); a tool turn answers one. Each
provider turns parts and calls into its own wire form in one place (`openai_provider.chat_messages`,
`embedded.template_messages`).

`check_messages` validates a list once at a boundary (a provider's input in `harness.calls`, a
loopback request): a malformed message is one `MessageError` naming the field's path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, TypeAlias

from pydantic import ConfigDict, Field, JsonValue, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict  # pydantic reads only these TypedDicts before 3.12


@with_config(ConfigDict(extra="forbid"))
class TextPart(TypedDict):
    type: Literal["text"]
    text: str


@with_config(ConfigDict(extra="forbid"))
class ImagePart(TypedDict):
    """A picture shown to a model that sees images (`sees_images`): base64 PNG, no data-URL prefix."""

    type: Literal["image"]
    image: str


ContentPart: TypeAlias = Annotated[TextPart | ImagePart, Field(discriminator="type")]


@with_config(ConfigDict(extra="forbid"))
class MessageToolCall(TypedDict):
    """A call an assistant turn made: `arguments` parsed (the JSON object the tool takes)."""

    id: str
    name: str
    arguments: dict[str, JsonValue]  # the tool's own argument object


@with_config(ConfigDict(extra="forbid"))
class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str


@with_config(ConfigDict(extra="forbid"))
class UserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[ContentPart]


@with_config(ConfigDict(extra="forbid"))
class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str
    tool_calls: NotRequired[list[MessageToolCall]]


@with_config(ConfigDict(extra="forbid"))
class ToolMessage(TypedDict):
    """A tool's result, answering the call `tool_call_id` names (empty when the caller kept no id)."""

    role: Literal["tool"]
    content: str
    tool_call_id: NotRequired[str]


ChatMessage: TypeAlias = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
Role = Literal["system", "user", "assistant", "tool"]

MESSAGES: TypeAdapter[list[ChatMessage]] = TypeAdapter(list[ChatMessage])


class MessageError(ValueError):
    """A message list that is not `list[ChatMessage]`: the first bad field's path and the fix."""


def check_messages(value: object, source: str = "messages") -> list[ChatMessage]:
    """`value` validated as chat messages (the same dicts, checked). Raises `MessageError` naming
    the first bad field, e.g. `messages[1].content[0].image: Field required`."""
    try:
        return MESSAGES.validate_python(value)
    except ValidationError as exc:
        # The deepest error is the one to name: a union reports each branch it tried, and the
        # shallow ones ("content: Input should be a valid string") hide the field that is wrong.
        err = max(exc.errors(include_url=False), key=lambda e: len(_path(e["loc"])))
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in _path(err["loc"]))
        msg = err["msg"]
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):  # a bad or missing role / part type
            tag = str(err["ctx"]["discriminator"]).strip("'")
            where += f".{tag}"
            msg = f"{err['ctx']['tag']!r} is not a {tag}" if "tag" in err["ctx"] else "missing"
        raise MessageError(
            f"{source}{where}: {msg} (a message is {{role: system|user|assistant|tool, "
            "content}; a user's content may be a list of text and image parts)"
        ) from None


def _path(loc: tuple[int | str, ...]) -> list[int | str]:
    # pydantic's location also names the union branch it tried (a role or part type right after
    # an index, "str", "list[...]"); the caller wants the field path only.
    keys = {"role", "content", "tool_calls", "tool_call_id", "type", "text", "image", "id", "name", "arguments"}
    tags = {"system", "user", "assistant", "tool", "text", "image"}
    path: list[int | str] = []
    for i, p in enumerate(loc):
        if isinstance(p, int) or (p in keys and not (p in tags and i and isinstance(loc[i - 1], int))):
            path.append(p)
    return path


def text_part(text: str) -> TextPart:
    return {"type": "text", "text": text}


def image_part(png_base64: str) -> ImagePart:
    return {"type": "image", "image": png_base64}


def text_of(message: ChatMessage) -> str:
    """The message's text: its content, or its text parts joined (images left out)."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p["type"] == "text")


def images_of(message: ChatMessage) -> list[str]:
    """The message's pictures (base64 PNGs), in order."""
    content = message["content"]
    return [] if isinstance(content, str) else [p["image"] for p in content if p["type"] == "image"]


def has_images(messages: list[ChatMessage]) -> bool:
    """Does any message show a picture? Only a model that `sees_images` takes one."""
    return any(images_of(m) for m in messages)


def hash_form(message: ChatMessage) -> Mapping[str, object]:
    """The message as the cache key hashes it. Before content parts a picture rode in an `image`
    key beside the text (`{"role", "content": TEXT, "image": PNG}`); a message that text parts and
    at most one picture can say is hashed in that form, so earlier runs' caches still answer it.
    Anything else (several pictures) is hashed as it is."""
    content = message["content"]
    images = images_of(message)
    if isinstance(content, str) or len(images) > 1:
        return message
    flat: dict[str, object] = {**message, "content": text_of(message)}
    if images:
        flat["image"] = images[0]
    return flat
