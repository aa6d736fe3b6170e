"""YAML from files a user did not necessarily write (gate files from pull requests, experiment files, the
``args.yaml`` beside a trajectory): PyYAML's safe loader, bounded.

Safe loading never builds arbitrary objects (a ``!!python/...`` tag is refused), but on its own it still
expands aliases without limit: a few hundred bytes of nested aliases stand for billions of nodes, and
whatever walks the result afterwards (a JSON dump, OmegaConf, a comparison) runs out of memory. Here a
document may hold at most ``MAX_YAML_NODES`` nodes *counted with every alias expanded*, a recursive
alias is refused, and a file larger than ``MAX_YAML_BYTES`` is refused before parsing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sim.util.errors import ConfigError
from sim.util.limits import MAX_YAML_BYTES as MAX_YAML_BYTES  # where readers have taken it from

MAX_YAML_NODES = 200_000


class _Budget(Exception):
    def __init__(self, message: str, mark) -> None:
        super().__init__(message)
        self.message, self.mark = message, mark


class BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that counts composed nodes with aliases expanded and stops at a budget."""

    def __init__(self, stream, max_nodes: int = MAX_YAML_NODES) -> None:
        super().__init__(stream)
        self._budget = max_nodes
        self._spent = 0
        self._sizes: dict[int, int] = {}

    def _spend(self, n: int, mark) -> None:
        self._spent += n
        if self._spent > self._budget:
            raise _Budget(f"expands to more than {self._budget:,} nodes (aliases counted expanded)", mark)

    def _size(self, node, mark) -> int:
        """Nodes of ``node`` with aliases expanded; an explicit stack (memoised, cycle-checked)."""
        sizes = self._sizes
        if id(node) in sizes:
            return sizes[id(node)]
        on_path: set[int] = set()
        stack: list[tuple[Any, bool]] = [(node, False)]
        while stack:
            n, done = stack.pop()
            if id(n) in sizes:
                continue
            kids = []
            if isinstance(n, yaml.SequenceNode):
                kids = list(n.value)
            elif isinstance(n, yaml.MappingNode):
                kids = [x for kv in n.value for x in kv]
            if done:
                on_path.discard(id(n))
                total = 1 + sum(sizes[id(k)] for k in kids)
                sizes[id(n)] = total
                if total > self._budget:
                    raise _Budget(
                        f"expands to more than {self._budget:,} nodes (aliases counted expanded)", mark
                    )
                continue
            if id(n) in on_path:
                raise _Budget("holds a recursive alias", mark)
            on_path.add(id(n))
            stack.append((n, True))
            for k in kids:
                if id(k) not in sizes:
                    if id(k) in on_path:
                        raise _Budget("holds a recursive alias", mark)
                    stack.append((k, False))
        return sizes[id(node)]

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None:
                if isinstance(node, yaml.CollectionNode) and not self._complete(node):
                    raise _Budget("holds a recursive alias", event.start_mark)
                self._spend(self._size(node, event.start_mark), event.start_mark)
        else:
            self._spend(1, self.peek_event().start_mark)
        return super().compose_node(parent, index)

    def _complete(self, node) -> bool:
        # A collection is still being composed while its end mark is unset (PyYAML sets it at the end).
        return node.end_mark is not None


def _problem(exc: Exception) -> tuple[int | None, str]:
    if isinstance(exc, _Budget):
        return (exc.mark.line + 1 if exc.mark is not None else None), exc.message
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return (mark.line + 1 if mark is not None else None), f"not valid YAML: {problem}"


def _check_size(text: str, source: str) -> None:
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_YAML_BYTES:,} bytes; not read")


def _parse(text: str, source: str, node: bool):
    _check_size(text, source)
    loader = None
    try:
        loader = BoundedSafeLoader(text)  # the reader refuses non-printable characters right here
        return loader.get_single_node() if node else loader.get_single_data()
    except (yaml.YAMLError, _Budget, RecursionError) as exc:
        line, msg = _problem(exc) if not isinstance(exc, RecursionError) else (None, "nested too deeply")
        raise ConfigError(f"{source}: " + (f"line {line}: " if line else "") + msg) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(text: str, source: str) -> Any:
    """The document of ``text`` as plain Python values; ``ConfigError`` naming ``source`` and the line."""
    return _parse(text, source, node=False)


def compose_yaml(text: str, source: str):
    """The node tree of ``text`` (keeps line numbers for messages), under the same bounds."""
    return _parse(text, source, node=True)


def load_yaml_file(path: Path, source: str | None = None) -> Any:
    """``load_yaml`` of a file (UTF-8), refusing one larger than the byte cap before reading it."""
    source = source or str(path)
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            raise ConfigError(f"{source}: larger than {MAX_YAML_BYTES:,} bytes; not read")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read ({exc.strerror or exc})") from None
    return load_yaml(text, source)
