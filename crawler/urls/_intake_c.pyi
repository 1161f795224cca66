"""Types of the compiled intake (`_intake_c.pyx`): the API of `crawler.urls.intake.IntakePy`."""

from collections.abc import Iterable, Sequence
from typing import Any

from crawler.extract import Link

class Intake:
    respect_nofollow: bool
    all_links: bool
    found: int
    limit: int
    repeated: int
    known: int
    def __init__(
        self,
        policy: Any,
        *,
        sort_query: bool = False,
        drop_params: Iterable[str] = (),
        respect_nofollow: bool = False,
        all_links: bool = False,
        slots: int = ...,
    ) -> None: ...
    def bind(self, seen: Any, fingerprinter: Any = None) -> None: ...
    def take(self, links: Sequence[Link]) -> list[str | Link]: ...
    def mark(self, url: str) -> None: ...
    def mark_many(self, urls: Iterable[str]) -> None: ...
    def knows(self, url: str) -> bool: ...
    def forget(self) -> None: ...
    def canonical(self, url: str) -> str | None: ...
