"""Bounded reading of the files a user hands to masorch: plans, configs, corpora, datasets, run logs;
and the one way to write an output file whole (:func:`replacing`, :func:`atomic_writer`).

Every input path goes through these helpers, so a bad input ends as one :class:`UsageError` naming
the file and the fix, never as a traceback, and no input is read without a bound: a whole file is
read up to a size cap (``validate /dev/zero`` stops after the cap, not when memory runs out), a line
file is streamed with a cap per line, and YAML is size- and alias-bounded before it is built (an
alias bomb expands to billions of nodes from a few hundred bytes).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from masorch.errors import UsageError

#: The most bytes of one text file (a plan, a prompt) read whole.
MAX_TEXT_BYTES = 16 * 1024 * 1024
#: The most bytes of one line of a JSONL file (a corpus document, a MASBench record, a log record).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: The most bytes of a YAML config.
MAX_YAML_BYTES = 1024 * 1024
#: The most nodes a YAML document may expand to, aliases counted at every use.
MAX_YAML_NODES = 100_000


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def _open_error(path: Path, what: str, exc: OSError) -> UsageError:
    if isinstance(exc, FileNotFoundError):
        return UsageError(f"no such file: {path}", hint=f"give the path of an existing {what}")
    if isinstance(exc, IsADirectoryError):
        return UsageError(
            f"the {what} {path} is a directory", hint=f"give the path of a {what}, not a directory"
        )
    if isinstance(exc, PermissionError):
        return UsageError(f"no permission to read the {what} {path}", hint="check the file's permissions")
    return UsageError(f"cannot read the {what} {path}: {exc.strerror or exc}", hint="check the path")


def decode_text(data: bytes, where: str, what: str) -> str:
    """``data`` as UTF-8 text; invalid UTF-8 or a NUL byte (a binary file) is a UsageError.

    >>> decode_text(b"ok", "x.txt", "plan file")
    'ok'
    """
    nul = data.find(b"\x00")
    if nul >= 0:
        raise UsageError(
            f"the {what} {where} is binary (a NUL byte at offset {nul})", hint=f"give a UTF-8 text {what}"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"the {what} {where} is not UTF-8 text (bad byte at offset {exc.start})",
            hint=f"give a UTF-8 text {what} (convert it with iconv, or check that it is the right file)",
        ) from None


def read_bytes(path: str | Path, *, what: str = "file", max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """At most ``max_bytes`` of ``path``; a larger (endless) or unreadable file is a UsageError."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise _open_error(path, what, exc) from None
    if len(data) > max_bytes:
        raise UsageError(
            f"the {what} {path} is larger than {_mib(max_bytes)}",
            hint=f"give a smaller {what}; is it the right file?",
            code="input_too_large",
        )
    return data


#: Rows a parquet reader decodes at once are sized to about this many bytes (a row's worst case).
_PARQUET_BATCH_BYTES = 64 * 1024 * 1024


def parquet_rows(
    path: str | Path,
    *,
    what: str,
    hint: str,
    max_bytes: int,
    columns: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The rows of a parquet file as dicts, refused (a UsageError) once they decode to more than
    ``max_bytes``: a small file can hold gigabytes (one long text a dictionary page repeats in every
    row, or text compressed a thousandfold), so the compressed size alone bounds nothing.

    The stored sizes are checked first (compressed and uncompressed, from the footer), then the rows
    are decoded in batches small enough that one batch stays near 64 MiB even if each of its rows
    holds the longest value a column chunk can store, counting the decoded bytes as they come.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        state = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(f"the {what} {path} {state}", hint=hint)
    too_big = UsageError(
        f"the {what} {path} holds more than {max_bytes / (1 << 20):g} MiB of data",
        hint="split it, or keep the rows you need in a smaller file",
        code="input_too_large",
    )
    if path.stat().st_size > max_bytes:
        raise too_big
    try:
        parquet = pq.ParquetFile(path)
        meta = parquet.metadata
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        if sum(g.total_byte_size for g in groups) > max_bytes:
            raise too_big
        row_bound = sum(
            max((g.column(c).total_uncompressed_size for g in groups), default=0)
            for c in range(meta.num_columns)
        )
        batch = max(1, min(65_536, _PARQUET_BATCH_BYTES // max(1, row_bound)))
        rows: list[dict[str, Any]] = []
        decoded = 0
        for record_batch in parquet.iter_batches(batch_size=batch, columns=columns):
            decoded += record_batch.nbytes
            if decoded > max_bytes:
                raise too_big
            rows.extend(record_batch.to_pylist())
    except (pa.ArrowException, OSError, KeyError) as exc:
        raise UsageError(f"{path} is not a readable parquet file: {str(exc)[:200]}", hint=hint) from None
    return rows


def read_text(path: str | Path, *, what: str = "file", max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of ``path`` (``-`` reads standard input), bounded by ``max_bytes``.

    A missing, unreadable, binary, non-UTF-8 or too large file is a :class:`UsageError` with a hint.
    """
    if str(path) == "-":
        if sys.stdin is None:  # started with standard input closed (`<&-`)
            raise UsageError(f"no standard input to read the {what} from", hint=f"give the {what}'s path")
        binary = getattr(sys.stdin, "buffer", None)  # a text-only stream (a test runner's) has none
        data = binary.read(max_bytes + 1) if binary is not None else sys.stdin.read(max_bytes + 1).encode()
        if len(data) > max_bytes:
            raise UsageError(
                f"the {what} on standard input is larger than {_mib(max_bytes)}",
                hint=f"give a smaller {what}",
                code="input_too_large",
            )
        return decode_text(data, "on standard input", what)
    return decode_text(read_bytes(path, what=what, max_bytes=max_bytes), str(path), what)


@dataclass(frozen=True)
class LineSpan:
    """One line of a file: its number, its byte range ``[start, end)`` (newline included), its text."""

    number: int
    start: int
    end: int
    text: str


def iter_line_spans(
    path: str | Path,
    *,
    what: str = "file",
    max_line_bytes: int = MAX_LINE_BYTES,
    start: int = 0,
    first_number: int = 1,
    complete_only: bool = False,
) -> Iterator[LineSpan]:
    """Each line of ``path`` from byte ``start`` as a :class:`LineSpan`, streamed, bounded and checked.

    A line longer than ``max_line_bytes`` (an endless or binary file), a NUL byte or invalid UTF-8 is
    a :class:`UsageError` naming the file and line. The trailing newline is stripped from ``text``.
    With ``complete_only``, a last line without its newline (a write still in progress) is left out.
    """
    path = Path(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise _open_error(path, what, exc) from None
    with fh:
        number, offset = first_number - 1, start
        try:
            fh.seek(start)
        except OSError as exc:
            raise _open_error(path, what, exc) from None
        while True:
            try:
                raw = fh.readline(max_line_bytes + 1)
            except OSError as exc:
                raise _open_error(path, what, exc) from None
            if not raw:
                return
            number += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise UsageError(
                    f"{path}:{number}: a line longer than {_mib(max_line_bytes)}",
                    hint=f"is {path} a {what}? each record is one line",
                    code="input_too_large",
                )
            if complete_only and not raw.endswith(b"\n"):
                return
            text = decode_text(raw.rstrip(b"\r\n"), f"{path} (line {number})", what)
            yield LineSpan(number, offset, offset + len(raw), text)
            offset += len(raw)


def iter_lines(
    path: str | Path, *, what: str = "file", max_line_bytes: int = MAX_LINE_BYTES, complete_only: bool = False
) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of ``path``, streamed and bounded (:func:`iter_line_spans`)."""
    for span in iter_line_spans(path, what=what, max_line_bytes=max_line_bytes, complete_only=complete_only):
        yield span.number, span.text


def json_object(text: str, where: str, *, item: str = "a record", hint: str) -> dict[str, Any]:
    """One JSON line as an object; not JSON, nested too deeply, or not an object is a UsageError at ``where``.

    >>> json_object('{"a": 1}', "f.jsonl:1", hint="one object per line")
    {'a': 1}
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not JSON ({exc.msg})", hint=hint) from None
    except ValueError as exc:  # a number past the interpreter's digit limit
        raise UsageError(f"{where}: not JSON we can read ({str(exc)[:80]})", hint=hint) from None
    except RecursionError:
        raise UsageError(f"{where}: not JSON (nested too deeply)", hint=hint) from None
    if not isinstance(value, dict):
        raise UsageError(f"{where}: {item} must be a JSON object", hint=hint)
    return value


def iter_jsonl(
    path: str | Path,
    *,
    what: str = "JSONL file",
    item: str = "a record",
    hint: str,
    max_line_bytes: int = MAX_LINE_BYTES,
    complete_only: bool = False,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each non-blank line of a JSONL file, streamed and bounded.

    The one JSONL reader: each line is bounded and decoded by :func:`iter_lines` and parsed by
    :func:`json_object`, so every bad line is a :class:`UsageError` naming the file and line. With
    ``complete_only`` a torn last line (a file still being written) is left out, not an error.
    """
    for number, line in iter_lines(
        path, what=what, max_line_bytes=max_line_bytes, complete_only=complete_only
    ):
        if line.strip():
            yield number, json_object(line, f"{path}:{number}", item=item, hint=hint)


def _yaml_loader() -> type:
    import yaml

    # libyaml's parser where PyYAML was built with it: about 8x faster on a config at the size cap.
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class BoundedLoader(base):  # type: ignore[valid-type,misc]
        """A SafeLoader that checks the composed document's expanded size before building it."""

        max_nodes = MAX_YAML_NODES

        def construct_document(self, node: Any) -> Any:
            _check_expansion(node, self.max_nodes)
            return super().construct_document(node)

    # YAML 1.1 reads 1e-4 (an exponent without a dot) as text, so `learning_rate: 1e-4` was refused
    # as "must be float, got '1e-4'"; read it as the number it is, as YAML 1.2 does.
    BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))
    return BoundedLoader


_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


def _check_expansion(root: Any, max_nodes: int) -> None:
    """Raise unless the node graph, with each alias expanded where it is used, has <= max_nodes nodes."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    # Iterative post-order walk: a deep document must not exhaust the interpreter's stack here.
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            _check_unique_keys(node)
            children = _children(node)
            total = 1 + sum(sizes[id(c)] for c in children)
            sizes[key] = min(total, max_nodes + 1)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise UsageError(
                "the YAML refers to itself through an alias (a recursive structure)",
                hint="write the values out; configs need no recursive anchors",
                code="yaml_too_large",
            )
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    if sizes[id(root)] > max_nodes:
        raise UsageError(
            f"the YAML expands to more than {max_nodes:,} values (anchors and aliases counted at each use)",
            hint="write a smaller config; repeated `*alias` references multiply its size",
            code="yaml_too_large",
        )


def _check_unique_keys(node: Any) -> None:
    """Raise if a mapping gives one key twice: PyYAML keeps the last value, so a config's repeated
    key would silently undo the first (YAML itself requires keys to be unique)."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return
    seen: set[tuple[str, str]] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = (key_node.tag, key_node.value)  # 1 and "1" are two keys (an int and a string)
        if key in seen:
            raise UsageError(
                f"the key {key_node.value[:40]!r} is given twice (line {key_node.start_mark.line + 1})",
                hint="keep one of the two: YAML keys must be unique",
                code="yaml_duplicate_key",
            )
        seen.add(key)


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml(text: str, *, what: str = "YAML config", max_nodes: int = MAX_YAML_NODES) -> Any:
    """The value of one YAML document, checked for size before it is built (safe tags only).

    Malformed YAML, an alias bomb or a recursive anchor, a document nested too deep or a value YAML
    cannot build (a date like 2024-13-45) is a :class:`UsageError` naming ``what``.

    >>> load_yaml("a: &x [1, 2]\\nb: *x")
    {'a': [1, 2], 'b': [1, 2]}
    """
    import yaml

    loader = None
    try:
        loader = _yaml_loader()(text)  # the reader checks the characters here already
        loader.max_nodes = max_nodes
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise UsageError(
            f"the {what} is not valid YAML: {_yaml_problem(exc)}", hint="fix the YAML syntax"
        ) from None
    except RecursionError:
        raise UsageError(f"the {what} is nested too deeply", hint="flatten the YAML") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise UsageError(
            f"the {what} holds a value YAML cannot read: {exc}", hint="quote the value"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_problem(exc: Any) -> str:
    """What PyYAML found and where (line and column from 1), without its ``in "<unicode string>"``:
    the caller names the text."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is None or not problem:
        return str(exc)
    context = f"{exc.context}, " if getattr(exc, "context", None) else ""
    return f"{context}{problem} (line {mark.line + 1}, column {mark.column + 1})"


def load_yaml_file(path: str | Path, *, what: str = "YAML config", max_bytes: int = MAX_YAML_BYTES) -> Any:
    """:func:`load_yaml` of a file read with :func:`read_text` (at most ``max_bytes``)."""
    text = read_text(path, what=what, max_bytes=max_bytes)
    return load_yaml(text, what=f"{what} {path}")


def open_appending(path: str | Path, *, what: str, flag: str) -> IO[str]:
    """``path`` open to append UTF-8 text, its folder made first; a UsageError naming ``flag`` when the
    file system refuses (a directory, no permission, a read-only disk)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("a", encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"cannot open {what} {path}: {exc.strerror or exc}", hint=f"pass a writable {flag} path"
        ) from exc


def check_writable(path: str | Path, *, what: str, flag: str) -> None:
    """The UsageError of :func:`open_appending` now, for an output written only at the end of a long
    run (which would otherwise be lost to a bad path); a file the check makes is removed again.

    >>> check_writable(tempfile.gettempdir(), what="chat record", flag="--chat-out")
    Traceback (most recent call last):
    masorch.errors.UsageError: cannot open chat record ...: Is a directory (hint: ...)
    """
    path = Path(path)
    existed = path.exists()
    open_appending(path, what=what, flag=flag).close()
    if not existed:
        path.unlink(missing_ok=True)


@contextmanager
def replacing(target: str | Path) -> Iterator[Path]:
    """A temporary sibling of ``target`` to write; it replaces ``target`` only when the block succeeds.

    A write that fails or is interrupted (an exception, Ctrl-C) leaves ``target`` as it was, never
    truncated or half written, and leaves no temporary file behind.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = out.write_text("kept")
    >>> try:
    ...     with replacing(out) as tmp:
    ...         _ = tmp.write_text("half")
    ...         raise KeyboardInterrupt
    ... except KeyboardInterrupt:
    ...     pass
    >>> out.read_text(), sorted(p.name for p in out.parent.iterdir())
    ('kept', ['a.txt'])
    """
    target = Path(target)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:  # named by the file asked for, not the hidden temporary one
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        # mkstemp makes 0600; the result gets what a plain open would: the replaced file's mode, or
        # 0666 less the umask for a new file.
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


@contextmanager
def atomic_writer(target: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """An open file (``mode`` ``"w"`` for UTF-8 text, ``"wb"`` for bytes) that replaces ``target``
    only when the block succeeds (see :func:`replacing`).

    Text with no UTF-8 form (a lone surrogate, from a ``"\\ud800"`` escape) is written as its
    backslash escape, which inside a JSON string (``json.dumps(..., ensure_ascii=False)``) is the
    string's own JSON escape: the file reads back as the same data.
    """
    with replacing(target) as tmp:
        text = "b" not in mode
        with tmp.open(
            mode, encoding="utf-8" if text else None, errors="backslashreplace" if text else None
        ) as fh:
            yield fh
