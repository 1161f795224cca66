"""Types of the compiled extractor (`_extract_c.pyx`): the same API as `_machine`."""

from collections.abc import Iterable, Mapping
from typing import Any

from crawler._intake_c import Intake

from ._link import Link

class LinkExtractor:
    _strict: bool
    nofollow: bool
    encoding: str
    ids: set[str]
    ids_complete: bool
    def __init__(
        self,
        base_url: str,
        encoding: str | None = None,
        *,
        link_set: str | Mapping[str, Any] = "links",
        max_token: int = ...,
        collect_ids: bool = False,
        intake: Intake | None = None,
    ) -> None: ...
    @property
    def base_url(self) -> str: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[Link]: ...
    def close(self) -> list[Link]: ...

def unescape(value: bytes) -> str: ...
def resolve(base: str, raw: str) -> str | None: ...
def resolve_all(base: str, raws: Iterable[str]) -> list[str | None]: ...
def memchr_count(data: bytes, byte: int = 60) -> int: ...
