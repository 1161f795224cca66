"""Config files: a TOML file read into keys (top level or group tables), checked into a
CrawlConfig with any overrides on top, and values rendered back as TOML.

A TOML file holds the same keys as the dataclass fields, either at the top level or inside a
table named after their group (``[limits]``, ``[http]`` ...: the groups of ``crawler crawl
--help``, see ``GROUPS``). Every error names the source (file or flag), the key and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crawler.config.checks import ConfigError
from crawler.config.model import GROUP_OF, GROUPS, KEYS, REMOVED, CrawlConfig

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["as_toml_value", "from_mapping", "load_config", "load_toml"]


def _flatten(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Flatten top-level keys and group tables; reject unknown or misplaced keys."""
    flat: dict[str, Any] = {}

    def unknown(key: str, where: str) -> ConfigError:
        if key in REMOVED:
            return ConfigError(REMOVED[key], key=where, source=source)
        import difflib  # noqa: PLC0415  (start-up time: only for an unknown key)

        close = difflib.get_close_matches(key, [*KEYS, *GROUPS], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return ConfigError(f"unknown key{hint}", key=where, source=source)

    def put(key: str, value: Any, where: str) -> None:
        if key in flat:
            raise ConfigError(
                "given twice (top level and in its group table)", key=where, source=source
            )
        flat[key] = value

    for key, value in data.items():
        if key in GROUPS and isinstance(value, dict):
            for sub, subvalue in value.items():
                where = f"{key}.{sub}"
                if sub not in GROUP_OF:
                    raise unknown(sub, where)
                if GROUP_OF[sub] != key:
                    raise ConfigError(
                        f"belongs in [{GROUP_OF[sub]}], not [{key}]", key=where, source=source
                    )
                put(sub, subvalue, where)
        elif key in GROUP_OF:
            put(key, value, key)
        else:
            raise unknown(key, key)
    return flat


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file into a flat ``{key: value}`` mapping; values not yet checked.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or holds an unknown key.
    """
    import tomllib  # noqa: PLC0415  (start-up time: only with a config file)

    source = str(path)
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file: {exc.strerror or exc}", source=source
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=source) from None
    return _flatten(data, source)


def from_mapping(
    values: Mapping[str, Any], *, source: str | None = None, together: bool = True
) -> CrawlConfig:
    """Build a validated CrawlConfig from ``{key: value}`` (unknown keys are an error)."""
    for key in values:
        if key in REMOVED:
            raise ConfigError(REMOVED[key], key=key, source=source)
        if key not in GROUP_OF:
            import difflib  # noqa: PLC0415

            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key{hint}", key=key, source=source)
    return CrawlConfig(**values).validated(source=source, together=together)


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    overrides_source: str = "command line",
) -> CrawlConfig:
    """The file's settings (if any), then ``overrides`` on top; both validated.

    The file is validated on its own first so that an error names the file; then the
    overrides, so that an error from them names ``overrides_source``.
    """
    config = CrawlConfig()
    if path is not None:
        config = from_mapping(load_toml(path), source=str(path), together=not overrides)
    if overrides:
        for key in overrides:
            if key not in GROUP_OF:
                reason = REMOVED.get(key, "unknown key")
                raise ConfigError(reason, key=key, source=overrides_source)
        config = config.replace(**overrides).validated(source=overrides_source)
    return config


def as_toml_value(value: object) -> str:
    """A default rendered as TOML (strings quoted, tuples as arrays, None as a comment)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(as_toml_value(v) for v in value) + "]"
    return repr(value)
