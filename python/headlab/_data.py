"""headlab.write_data and headlab.read_data: a data file of your own sequences
(`headlab train --data FILE`: one JSON object per line, {"tokens": [...],
"targets": [...], "attend": {...}}) from arrays, and back.

Every value is checked here with the rules of the C++ reader
(train/data_file.h) before a byte is written, so that a mistake is named by
row and position rather than met later by the CLI as FILE:LINE. What the
reader checks against the model (ids below --vocab, targets below --classes,
rows within --seq-len) is the CLI's to check when it reads the file: a file
has no model."""
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from . import _core, _tokens
from ._patterns import _is_int

# --vocab and --classes are at most 2^31 - 1, so every id and target is below it.
_ID_LIMIT = 2**31 - 1
_INFERRED_POSITIONS = 1 << 16  # the positions a line may take while --seq-len is inferred
_KEYS = ("tokens", "targets", "attend")
_BLANKS = b" \t\r\n\f\v"
_BOM = b"\xef\xbb\xbf"


def _max_line_bytes(positions):
    """The longest line the reader takes for `positions` tokens a sequence
    (DataFile::max_line_bytes)."""
    return (1 << 20) + 64 * min(max(positions, 1), 1 << 24)


def definition(name):
    """How the CLI defines a data file's pattern (DataFile::rows), which
    heads.json and report.html show."""
    return f'the data file\'s "attend" pattern "{name}".'


class _Where:
    """How a message names a place: a row and position of write_data's
    arrays, or a line of a file and an index into it (as the CLI does)."""

    def __init__(self, row=None, file=None, line=None):
        self.row, self.file, self.line = row, file, line

    def __call__(self, field, position=None):
        if self.file is not None:
            return f"{self.file}:{self.line}: {field}" + ("" if position is None else f"[{position}]")
        return f"{field}: row {self.row}" + ("" if position is None else f", position {position}")


# --- the reader's rules, for one sequence ------------------------------------

def _check_ids(values, low, field, where):
    """Every value of the 1-D int array in [low, 2^31 - 1): a token id (low 0)
    or a target (low -1, none)."""
    bad = np.flatnonzero((values < low) | (values >= _ID_LIMIT))
    if bad.size:
        i = int(bad[0])
        meaning = "token ids are >= 0" if low == 0 else "targets are -1 (none) or a class >= 0"
        raise ValueError(f"{where(field, i)}: {int(values[i])} is out of range: {meaning} and below 2^31 - 1 "
                         "(the largest --vocab and --classes)")


def _check_pattern_name(name, field):
    if not isinstance(name, str):
        raise TypeError(f"{field}: a pattern's name is a string, got {name!r}")
    try:
        _core.check_pattern_name(name)  # the analysis's own rule (analysis/attend.h)
    except ValueError as e:
        raise ValueError(f"{field}: {e}") from None


def _check_entries(name, entries, length, causal, where):
    """A pattern's entries for one sequence: one per position, each a key the
    query can see, a non-empty list of distinct such keys, or None."""
    field = f"attend['{name}']"
    if not isinstance(entries, (list, tuple)) or len(entries) != length:
        got = f"{len(entries)} entries" if isinstance(entries, (list, tuple)) else repr(entries)[:80]
        raise ValueError(f"{where(field)}: expected one entry per token ({length}): a key position, a list of them, "
                         f"or None where the query is not scored; got {got}")
    for q, entry in enumerate(entries):
        if entry is None:
            continue
        keys = entry if isinstance(entry, (list, tuple)) else [entry]
        if not keys:
            raise ValueError(f"{where(field, q)}: an empty list; use None for a query that is not scored")
        last = q if causal else length - 1
        for key in keys:
            if not _is_int(key):
                raise ValueError(f"{where(field, q)}: {key!r} is not a key position (an int, a list of them, or None)")
            if not 0 <= key <= last:
                rule = (" under causal attention (a query sees itself and earlier positions; a --bidirectional "
                        "model's data is written with bidirectional=True)" if causal else "")
                raise ValueError(f"{where(field, q)}: key {key} is not a key query {q} can see: keys are in "
                                 f"[0, {last}]{rule}")
        if len(set(int(k) for k in keys)) != len(keys):
            raise ValueError(f"{where(field, q)}: {list(keys)} lists a key twice")


def _check_sequence(tokens, targets, attend, causal, where):
    """tokens, targets: 1-D int arrays (targets None: next-token); attend:
    name -> entries. The reader's checks that need no model."""
    if tokens.size == 0:
        raise ValueError(f"{where('tokens')}: no tokens; a sequence has at least one")
    _check_ids(tokens, 0, "tokens", where)
    if targets is not None:
        if targets.size != tokens.size:
            raise ValueError(f"{where('targets')}: {targets.size} targets for {tokens.size} tokens: targets are as "
                             "long as their tokens")
        _check_ids(targets, -1, "targets", where)
    for name, entries in attend.items():
        _check_entries(name, entries, tokens.size, causal, where)


def _has_a_target(tokens, targets):
    return bool((targets >= 0).any()) if targets is not None else tokens.size >= 2


def _has_a_key(rows):
    """Whether a pattern's entries, per row (None: the row lacks it), give
    some query a key: one without could never be scored, so the reader (and
    headlab.analyze) refuse it."""
    return any(row is not None and any(entry is not None for entry in row) for row in rows)


def _no_target_error(where):
    return ValueError(f"{where}: no position has a target (every target is -1, or every sequence is a single token "
                      "without targets), so there is nothing to learn or score; the CLI refuses such a file")


# --- arrays -> lines ----------------------------------------------------------

def _rows(values, lengths, field):
    """(list of 1-D int arrays, padded width) of a [B, T] array (with `lengths`:
    each row's real tokens) or of a list of sequences of different lengths."""
    if _tokens._ragged(values):
        if lengths is not None:
            raise ValueError(f"{field}: lengths= marks the real tokens of a padded array [B, T]; a list of sequences "
                             "of different lengths has its own")
        rows = [_tokens._int_array(row, f"{field}[{i}]") for i, row in enumerate(values)]
        for i, row in enumerate(rows):
            if row.shape[0] != 1:
                raise ValueError(f"{field}[{i}]: expected a sequence of ids, got shape {list(row.shape)}")
        return [row[0] for row in rows], max(row.shape[1] for row in rows)
    array = _tokens._int_array(values, field)
    if lengths is None:
        return list(array), array.shape[1]
    n = _tokens._int_array(lengths, "lengths")
    if n.shape != (1, array.shape[0]):
        raise ValueError(f"lengths: expected one length per sequence ({array.shape[0]}), got shape "
                         f"{list(np.shape(lengths))}")
    n = n[0]
    bad = np.flatnonzero((n < 1) | (n > array.shape[1]))
    if bad.size:
        raise ValueError(f"lengths: row {int(bad[0])}: {int(n[bad[0]])} is not in [1, {array.shape[1]}] "
                         "(the tokens' positions)")
    return [array[b, :int(n[b])] for b in range(array.shape[0])], array.shape[1]


def _target_rows(values, rows, width, ragged):
    """Each row's targets: per sequence, each as long as its tokens, when the
    tokens (ragged) or the targets are sequences of different lengths; else a
    [B, T] array of the tokens' shape whose padded positions are dropped."""
    if ragged or _tokens._ragged(values):
        return _tokens.target_rows(values, [row.size for row in rows])
    array = _tokens._int_array(values, "targets")
    if array.shape != (len(rows), width):
        raise ValueError(f"targets: expected shape {[len(rows), width]} (the tokens'), got {list(array.shape)}")
    return [array[b, :row.size] for b, row in enumerate(rows)]


def _attend_rows(attend, rows, width):
    """name -> one entry list per row (None: the row has no such pattern), of
    key lists as a data file's "attend" or a boolean mask [B, T, T] / [T, T]."""
    if attend is None:
        return {}
    if not isinstance(attend, Mapping):
        raise TypeError(f"attend: expected a dict name -> pattern (per-sequence key lists, or a boolean mask "
                        f"[B, T, T]); got {type(attend).__name__}")
    out = {}
    for name, value in attend.items():
        _check_pattern_name(name, "attend")
        field = f"attend['{name}']"
        if isinstance(value, np.ndarray) and value.dtype == np.bool_:
            out[name] = _mask_entries(field, value, rows, width)
        elif isinstance(value, (list, tuple)):
            if len(value) != len(rows):
                raise ValueError(f"{field}: expected one list per sequence ({len(rows)}), got {len(value)}")
            out[name] = [[_plain(e) for e in entries] if isinstance(entries, (list, tuple, np.ndarray)) else entries
                         for entries in value]
        else:
            raise TypeError(f"{field}: expected per-sequence key lists (an entry per token: a key, a list of keys, "
                            f"or None) or a boolean mask [B, T, T]; got {type(value).__name__}")
    return out


def _plain(entry):
    return entry.tolist() if isinstance(entry, np.ndarray) else entry


def _mask_entries(field, mask, rows, width):
    if mask.shape == (width, width):
        mask = np.broadcast_to(mask, (len(rows), width, width))
    if mask.shape != (len(rows), width, width):
        raise ValueError(f"{field}: a mask has shape [B, T, T] = {[len(rows), width, width]} (query, key) or [T, T]; "
                         f"got {list(mask.shape)}")
    # Row b of n tokens reads mask[b, :n, :n]: a mask is padded as the tokens
    # are, and what its padding holds is not written (headlab.analyze alike).
    out = []
    for b, row in enumerate(rows):
        n = row.size
        out.append([None if not keys.size else int(keys[0]) if keys.size == 1 else keys.tolist()
                    for keys in (np.flatnonzero(mask[b, q, :n]) for q in range(n))])
    return out


def _json_entry(entry):
    """A checked entry as JSON writes it: None, a key, or a list of keys."""
    if entry is None or _is_int(entry):
        return None if entry is None else int(entry)
    return [int(key) for key in entry]


def encode(tokens, targets=None, *, lengths=None, attend=None, causal=True):
    """The data file's text for these sequences, every value checked first."""
    rows, width = _rows(tokens, lengths, "tokens")
    ys = None if targets is None else _target_rows(targets, rows, width, _tokens.ragged(tokens, lengths))
    patterns = _attend_rows(attend, rows, width)
    bound = _max_line_bytes(max(row.size for row in rows))
    lines, any_target = [], False
    for b, row in enumerate(rows):
        where = _Where(row=b)
        line_attend = {name: entries[b] for name, entries in patterns.items() if entries[b] is not None}
        _check_sequence(row, None if ys is None else ys[b], line_attend, causal, where)
        any_target = any_target or _has_a_target(row, None if ys is None else ys[b])
        record = {"tokens": row.tolist()}
        if ys is not None:
            record["targets"] = ys[b].tolist()
        if line_attend:
            record["attend"] = {name: [_json_entry(e) for e in entries] for name, entries in line_attend.items()}
        line = json.dumps(record, separators=(",", ":")) + "\n"
        if len(line) > bound:
            raise ValueError(f"tokens: row {b}: its line takes {len(line)} bytes, more than the {bound} the reader "
                             f"takes for {row.size} tokens (1 MiB plus 64 bytes a position): give fewer keys")
        lines.append(line)
    if not any_target:
        raise _no_target_error("targets" if ys is not None else "tokens")
    for name, entries in patterns.items():  # as the reader and headlab.analyze refuse such a pattern
        if not _has_a_key(entries):
            raise ValueError(f"attend['{name}'] gives no query a key in any row, so no head could be scored on it; "
                             "give keys where the pattern applies, or leave the pattern out")
    return "".join(lines)


# --- lines -> arrays ----------------------------------------------------------

def _parse_line(text, causal, seq_len, where):
    """(tokens, targets or None, attend) of one line, checked as parse_line is."""
    def refuse_repeats(pairs):
        keys = [k for k, _ in pairs]
        for k in keys:
            if keys.count(k) > 1:
                raise ValueError(f'the key "{k[:40]}" appears twice in one object')
        return dict(pairs)

    def refuse_constant(name):
        raise ValueError(f"{name} is not JSON")

    try:
        record = json.loads(text.decode("utf-8"), object_pairs_hook=refuse_repeats, parse_constant=refuse_constant)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"{where.file}:{where.line}: invalid JSON: {e}") from None
    head = f"{where.file}:{where.line}"
    if not isinstance(record, dict):
        raise ValueError(f'{head}: expected a JSON object {{"tokens": [...]}}, got {type(record).__name__}')
    for key in record:
        if key not in _KEYS:
            raise ValueError(f'{head}: unknown key "{key[:40]}" (expected "tokens" and optionally "targets" and '
                             '"attend")')
    if "tokens" not in record:
        raise ValueError(f'{head}: missing "tokens"')
    tokens = _ints(record["tokens"], "tokens", where)
    if seq_len is not None and tokens.size > seq_len:
        raise ValueError(f"{head}: {tokens.size} tokens, longer than seq_len {seq_len}")
    targets = None if "targets" not in record else _ints(record["targets"], "targets", where)
    attend = record.get("attend", {})
    if not isinstance(attend, dict):
        raise ValueError(f'{head}: "attend" must be an object {{"NAME": [one entry per position]}}')
    for name in attend:
        _check_pattern_name(name, f'{head}: "attend"')
    _check_sequence(tokens, targets, attend, causal, where)
    return tokens, targets, attend


def _ints(values, field, where):
    if not isinstance(values, list):
        raise ValueError(f"{where(field)}: must be an array of integers")
    for i, value in enumerate(values):
        if not _is_int(value):
            raise ValueError(f"{where(field, i)}: {json.dumps(value)[:40]} is not an integer")
        if not -2**63 <= value < 2**63:
            raise ValueError(f"{where(field, i)}: {value} is out of range")
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _lines(path, bound):
    """(line number, bytes) of each non-blank line, each at most `bound` bytes
    and starting like a JSON object (a binary file costs nothing)."""
    with open(path, "rb") as f:
        number = 0
        while True:
            line = f.readline(bound + 1)
            if not line:
                return
            number += 1
            if len(line) > bound and not line.endswith(b"\n"):
                raise ValueError(f"{path}:{number}: the line is longer than {bound} bytes, the most a sequence takes "
                                 "(is this a JSONL file, one sequence per line? seq_len=N bounds the lines for longer "
                                 "sequences)")
            start = line.lstrip(_BLANKS)
            if not start:
                continue
            start = start[len(_BOM):].lstrip(_BLANKS) if start.startswith(_BOM) else start
            if not start.startswith(b"{"):
                raise ValueError(f"{path}:{number}: expected a JSON object {{\"tokens\": [...]}} on each line, but "
                                 f"the line starts with {start[:1]!r} (is this a JSONL file, one sequence per line?)")
            yield number, start


def read_data(path, *, seq_len=None, bidirectional=False):
    """The sequences of a data file as headlab.analyze's keywords: tokens and
    targets [B, T] (T: seq_len, else the longest sequence; targets -1 where a
    position has none, the next token where the line has no "targets"),
    lengths [B] (None when no row is padded), patterns (the file's "attend",
    each as per-sequence key lists with the CLI's definition), roles (a dict
    role -> pattern: one per pattern, called by its name, as the CLI's) and
    sources (False). Ids are int64, as torch takes them. So
    `headlab.analyze(model, **headlab.read_data(path,
    seq_len=model.spec["max_seq_len"]))` gives the
    records of `headlab analyze RUN --data path`, which pads every row to the
    model's seq_len. Checked as the CLI reads it (a pattern no line gives a
    key is refused): bidirectional=True lets a key follow its query."""
    path = os.fsdecode(os.fspath(path))  # FILE:LINE in messages as the path's text
    if seq_len is not None and (not _is_int(seq_len) or seq_len < 1):
        raise ValueError(f"read_data: seq_len must be an int >= 1, got {seq_len!r}")
    if not isinstance(bidirectional, (bool, np.bool_)):
        raise TypeError(f"read_data: bidirectional must be True or False, got {bidirectional!r}")
    info = os.stat(path)  # FileNotFoundError names the path
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"read_data: {path} is not a regular file; a data file is read from a file")
    bound = _max_line_bytes(seq_len or _INFERRED_POSITIONS)
    sequences, first_lines = [], {}  # each pattern's name -> the line it first appears on
    for number, text in _lines(path, bound):
        sequence = _parse_line(text, not bidirectional, seq_len, _Where(file=path, line=number))
        for name in sequence[2]:
            first_lines.setdefault(name, number)
        sequences.append(sequence)
    if not sequences:
        raise ValueError(f"{path}: no sequences (the file is empty or holds only blank lines)")
    if not any(_has_a_target(tokens, targets) for tokens, targets, _ in sequences):
        raise _no_target_error(path)
    for name, line in first_lines.items():  # the message of DataFile's constructor
        if not _has_a_key([attend.get(name) for _, _, attend in sequences]):
            raise ValueError(f'{path}:{line}: "attend" pattern "{name}" gives no query a key in this line nor in any '
                             "other (all its entries are null), so no head could be scored on it; give keys where the "
                             "pattern applies (a key position or a list of them), or leave the pattern out")
    return _batch(sequences, list(first_lines), seq_len)


def _batch(sequences, names, seq_len):
    # int64, what torch's losses and embeddings take (torch.from_numpy(targets)).
    n = np.array([tokens.size for tokens, _, _ in sequences], dtype=np.int64)
    width = seq_len or int(n.max())
    tokens = np.zeros((len(sequences), width), dtype=np.int64)
    targets = np.full((len(sequences), width), -1, dtype=np.int64)
    for b, (ids, ys, _) in enumerate(sequences):
        tokens[b, :ids.size] = ids
        if ys is None:
            targets[b, :ids.size - 1] = ids[1:]  # next-token; the last position has none
        else:
            targets[b, :ids.size] = ys
    patterns = {name: ([attend.get(name, [None] * ids.size) for ids, _, attend in sequences], definition(name))
                for name in names}
    # A data file's roles are its patterns, each called by its name, in the
    # order they first appear (DataFile::describe): what `headlab analyze RUN
    # --data FILE` and a run trained on the file expect.
    return dict(tokens=tokens, targets=targets, lengths=None if (n == width).all() else n, patterns=patterns,
                roles={name: name for name in names}, sources=False)


# --- the file -----------------------------------------------------------------

def folder_kind(folder):
    """"run" or "sweep" when `folder` holds headlab's own files (its marker,
    a checkpoint, a sweep.json, a run's snapshots/), another marker's kind,
    else ""."""
    folder = Path(folder)
    kind = _core.folder_marker(os.fsencode(folder))  # the C++ side's reading of the marker
    if kind:
        return kind
    if (folder / "sweep.json").exists():
        return "sweep"
    if (folder / "checkpoint.safetensors").exists():
        return "run"
    if folder.name == "snapshots" and folder_kind(folder.parent) == "run":
        return "run"
    return ""


def _kind_of(mode):
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def check_output(path, overwrite, *, into_run=False, caller="write_data"):
    """The absolute path a data file may be written to: never onto a folder or
    anything but a regular file, onto an existing file only with overwrite,
    into an existing folder, and (unless into_run) not inside a run's or
    sweep's folder, whose files are headlab's own."""
    text = os.fsdecode(os.fspath(path))  # a bytes path too, as open() takes it
    if not text:
        raise ValueError(f"{caller}: the path is empty; give a file name such as rows.jsonl")
    out = Path(os.path.abspath(text))
    try:
        info = out.lstat()
    except FileNotFoundError:
        info = None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(f"{caller}: {text} is a folder; give a file name such as {Path(text) / 'rows.jsonl'}")
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{caller}: refusing to write {text}: it is {_kind_of(info.st_mode)}, not a regular "
                             "file (give a new file name)")
        if not overwrite:
            raise FileExistsError(f"{caller}: {text} exists; pass overwrite=True to replace it")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"{caller}: {text}: the folder {out.parent} does not exist; create it first")
    kind = "" if into_run else folder_kind(out.parent)
    if kind:
        raise ValueError(f"{caller}: {text} is inside the {kind} folder {out.parent}, whose files are headlab's own; "
                         "write it into a folder of your own (headlab.train(out=..., data=rows) writes a run's own "
                         "data file)")
    return out


def write_atomic(out, text):
    """Writes `text` to `out` through a fresh temporary file in its folder and a
    rename: a reader sees the old file or the new one, never a part."""
    temporary = out.with_name(f"{out.name}.tmp.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, out)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_data(path, tokens, targets=None, *, lengths=None, attend=None, bidirectional=False, overwrite=False):
    """Writes a data file that `headlab train --data`, `eval --data` and
    `analyze --data` read: one line per sequence. tokens: [B, T] ids with
    lengths=[B] (each row's real tokens), or a list of sequences of different
    lengths. targets: of the tokens' shape, -1 where a position has none (for
    a list of sequences, one list per sequence as long as its tokens);
    None writes no "targets", which the CLI reads as next-token targets (the
    last position has none). attend: your head patterns, name -> one list per
    sequence with an entry per token (a key, a list of keys, or None), or a
    boolean mask [B, T, T] / [T, T] (query, key), row b of n tokens reading
    mask[b, :n, :n]; each must give some query a key. Keys must be ones the query
    sees: at most the query's position, unless bidirectional=True (a
    --bidirectional model). Everything is checked before anything is
    written; the file is written atomically, never over an existing file
    without overwrite=True, never inside a run or sweep folder. Returns the
    path."""
    for name, flag in (("bidirectional", bidirectional), ("overwrite", overwrite)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"write_data: {name} must be True or False, got {flag!r}")
    text = encode(tokens, targets, lengths=lengths, attend=attend, causal=not bidirectional)
    out = check_output(path, overwrite)
    write_atomic(out, text)
    return Path(os.fsdecode(os.fspath(path)))
