"""The caller's head patterns and expected roles for headlab.analyze, in the
form the C++ side reads (python/src/attend.h): each pattern's keys per query in
compressed rows. The C++ side checks every key against the batch."""
import numpy as np

_NO_KEYS = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32))


def patterns(specs, batch, seq_len, lengths):
    """[(name, definition, spec, offsets, keys)] of `specs`: a dict name ->
    pattern, or a list of "offset:K" / "position:K" strings (each its own
    name). A pattern is such a string, a boolean mask [B, T, T] or [T, T]
    (query, key), or one list per sequence with an entry per token (a key, a
    list of keys, or None), as a data file's "attend"; or a (pattern,
    definition) pair."""
    if specs is None:
        return []
    if isinstance(specs, dict):
        items = list(specs.items())
    elif isinstance(specs, (list, tuple)) and all(isinstance(s, str) for s in specs):
        items = [(s, s) for s in specs]
    else:
        raise TypeError("patterns: expected a dict name -> pattern (a mask [B, T, T], an \"offset:K\" or "
                        f"\"position:K\" string, or per-sequence key lists), or a list of such strings; got {specs!r:.80}")
    out = []
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"patterns: a pattern's name is a string, got {name!r}")
        definition = ""
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
            value, definition = value
        elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (str, np.ndarray)):
            # A mask or string is no sequence's key list: this is a (pattern, definition) pair.
            raise TypeError(f"patterns['{name}']: a (pattern, definition) pair's definition is a string, got "
                            f"{type(value[1]).__name__} {value[1]!r:.40}; a pattern alone is a mask, an \"offset:K\" "
                            "or \"position:K\" string, or per-sequence key lists")
        if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
            value = value.detach().cpu().numpy()  # a torch mask, read as tokens are
        if isinstance(value, np.ndarray) and value.dtype != np.bool_:
            raise TypeError(f"patterns['{name}']: a mask of dtype {value.dtype}; a mask is boolean, True where the "
                            f"attention mass counts: pass mask.astype(bool) (or mask != 0)")
        if isinstance(value, str):
            out.append((name, definition, value, *_NO_KEYS))
        elif isinstance(value, np.ndarray) and value.dtype == np.bool_:
            out.append((name, definition or "a mask given to headlab.analyze.", "",
                        *_mask_rows(name, value, batch, seq_len, lengths)))
        elif isinstance(value, (list, tuple)):
            out.append((name, definition or "key lists given to headlab.analyze.", "",
                        *_list_rows(name, value, batch, seq_len, lengths)))
        else:
            raise TypeError(f"patterns['{name}']: expected a boolean mask [B, T, T] or [T, T], an \"offset:K\" or "
                            f"\"position:K\" string, or per-sequence key lists; got {type(value).__name__}")
    return out


def _mask_rows(name, mask, batch, seq_len, lengths):
    if mask.shape == (seq_len, seq_len):
        mask = np.broadcast_to(mask, (batch, seq_len, seq_len))
    if mask.shape != (batch, seq_len, seq_len):
        raise ValueError(f"patterns['{name}']: a mask has shape [B, T, T] = {[batch, seq_len, seq_len]} (query, key) "
                         f"or [T, T] for every sequence; got {list(mask.shape)}")
    if lengths is not None:
        # A mask is padded as the tokens are: row b of length L reads
        # mask[b, :L, :L], its padding being no query and no key (as a
        # positional pattern skips the keys a short row lacks).
        real = np.arange(seq_len) < np.asarray(lengths)[:, None]
        mask = mask & real[:, :, None] & real[:, None, :]
    b, q, k = np.nonzero(mask)  # in row-major order: by sequence, then query
    counts = np.bincount(b * seq_len + q, minlength=batch * seq_len)
    return np.concatenate(([0], np.cumsum(counts))).astype(np.int64), k.astype(np.int32)


def _list_rows(name, rows, batch, seq_len, lengths):
    if len(rows) != batch:
        raise ValueError(f"patterns['{name}']: expected one list per sequence ({batch}), got {len(rows)}")
    offsets, keys = [0], []
    for b, row in enumerate(rows):
        n = seq_len if lengths is None else int(lengths[b])
        if not isinstance(row, (list, tuple)) or len(row) != n:
            raise ValueError(f"patterns['{name}'][{b}]: expected a list of {n} entries (one per token), got {row!r:.80}")
        for q, entry in enumerate(list(row) + [None] * (seq_len - n)):
            entry = entry.tolist() if isinstance(entry, np.ndarray) else entry
            entry = [] if entry is None else [entry] if _is_int(entry) else entry
            if not isinstance(entry, (list, tuple)) or not all(_is_int(k) for k in entry):
                raise ValueError(f"patterns['{name}'][{b}][{q}]: expected a key, a list of keys or None, got {entry!r}")
            if any(not -2**31 <= k < 2**31 for k in entry):
                raise ValueError(f"patterns['{name}'][{b}][{q}]: key {entry} is not a position")
            keys.extend(entry)
            offsets.append(len(keys))
    return np.asarray(offsets, dtype=np.int64), np.asarray(keys, dtype=np.int32)


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def roles(specs):
    """[(role, pattern)] of a dict role -> pattern name or a list of pairs."""
    if specs is None:
        return []
    pairs = list(specs.items()) if isinstance(specs, dict) else specs
    try:
        pairs = [(role, pattern) for role, pattern in pairs]
    except (TypeError, ValueError):
        raise TypeError(f"roles: expected a dict role -> pattern name, or (role, pattern) pairs; got {specs!r:.80}") from None
    for role, pattern in pairs:
        if not isinstance(role, str) or not isinstance(pattern, str):
            raise TypeError(f"roles: a role and its pattern are strings, got ({role!r}, {pattern!r})")
    return pairs
