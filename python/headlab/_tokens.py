"""Checks the token ids and targets a call receives, in numpy (never element by
element in Python), so that bad input is a ValueError naming the value and what
fits, before any C++ runs."""
import numpy as np


def _int_array(values, what):
    if type(values).__module__.split(".")[0] == "torch" and hasattr(values, "detach"):
        values = values.detach().cpu()  # np.asarray of a tensor that requires grad raises torch's own error
    try:
        array = np.asarray(values)
    except ValueError as e:  # ragged lists of lists
        raise ValueError(f"{what}: expected rows of equal length (an int array [batch, seq_len]): {e}") from None
    if array.dtype == object:
        problem = _object_problem(array)
        if problem is not None:
            raise ValueError(f"{what}: {problem}")
        array = array.astype(np.int64)  # Python ints in an object array (pandas' .values): each one checked
    if array.size and array.dtype.kind not in "iu":
        kind = "lengths" if what == "lengths" else "ids"
        raise ValueError(f"{what}: expected integer {kind}, got dtype {array.dtype}")
    if array.size == 0 and array.ndim in (1, 2):
        raise ValueError(f"{what}: {_nothing(values, array)}; pass at least one sequence of at least one token "
                         "(an int array [batch, seq_len] or a list of lists)")
    if array.ndim == 1:
        array = array[np.newaxis, :]
    if array.ndim != 2:
        raise ValueError(f"{what}: expected shape [batch, seq_len], got {list(array.shape)}")
    return array


def _nothing(values, array):
    """What an input without a single id is, in the user's terms: checked
    before a 1-D input becomes a batch of one, so that `[]` is not reported
    as the shape [1, 0] the package would have made of it."""
    if array.ndim == 1:
        kind = "list" if isinstance(values, list) else "tuple" if isinstance(values, tuple) else "sequence"
        return f"got an empty {kind} (shape [0]): no sequence, no token"
    batch, length = array.shape
    if batch == 0:
        return f"got no sequence (shape [0, {length}])"
    sequences = "1 sequence" if batch == 1 else f"{batch} sequences"
    return f"got {sequences} of no token (shape [{batch}, 0])"


def _object_problem(array):
    """Why numpy made an object array of the input: not a sequence, ragged rows,
    or an entry that is no int64 (None, a string, 2**70); None when nothing is
    wrong (integers in an object array of the right shape)."""
    if array.ndim == 0:
        return f"expected an int array [batch, seq_len] or a list of lists, got {type(array.item()).__name__}"
    for where in np.ndindex(array.shape):
        value = array[where]
        if isinstance(value, (list, tuple, np.ndarray)):
            break
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            return f"{value!r} at {list(where)} is not an integer id"
        if not np.iinfo(np.int64).min <= value <= np.iinfo(np.int64).max:
            return f"{value} at {list(where)} does not fit in an int64"
    if any(isinstance(array[where], (list, tuple, np.ndarray)) for where in np.ndindex(array.shape)):
        return "expected rows of equal length (an int array [batch, seq_len])"
    return None  # a rectangular array of integers that happens to be of dtype object


def _first_outside(array, low, high):
    bad = np.argwhere((array < low) | (array >= high))[0]
    return int(array[tuple(bad)]), [int(i) for i in bad]


def tokens(values, spec, what="tokens"):
    """[B, T] int32 ids within the model's vocabulary and length; `what` names
    the argument in messages."""
    array = _int_array(values, what)
    vocab, max_len = spec["vocab"], spec["max_seq_len"]
    if array.shape[1] > max_len:
        raise ValueError(f"{what}: {array.shape[1]} positions, but the model reads at most {max_len} (max_seq_len)")
    if array.min() < 0 or array.max() >= vocab:
        value, where = _first_outside(array, 0, vocab)
        raise ValueError(f"{what}: id {value} at {where} is outside the vocabulary [0, {vocab}) of this model")
    return np.ascontiguousarray(array, dtype=np.int32)


def targets(values, ids, spec):
    """[B, T] int32 class ids (-1: no target) of the tokens' shape, at least one not -1."""
    if values is None:
        raise ValueError("targets are required: class ids of the tokens' shape, -1 where a position has none")
    array = _int_array(values, "targets")
    if array.shape != ids.shape:
        raise ValueError(f"targets: expected shape {list(ids.shape)} (the tokens'), got {list(array.shape)}")
    classes = spec["classes"]
    if array.min() < -1 or array.max() >= classes:
        value, where = _first_outside(array, -1, classes)
        raise ValueError(f"targets: class {value} at {where} is outside [0, {classes}) (or -1 for no target)")
    return _with_a_target(np.ascontiguousarray(array, dtype=np.int32))


def next_token_targets(ids, spec):
    """Each position's target is the next token (the last has none)."""
    if spec["classes"] != spec["vocab"]:
        raise ValueError(f"this model predicts {spec['classes']} classes, not its {spec['vocab']} tokens: "
                         "give targets (an int array of the tokens' shape, -1 for no target)")
    out = np.full(ids.shape, -1, dtype=np.int32)
    out[:, :-1] = ids[:, 1:]
    return out


def _with_a_target(targets):
    # The loss is a mean over the targets: over none it is undefined, not 0.
    if (targets == -1).all():
        raise ValueError("targets: every entry is -1 (no position has a target); the loss and accuracy need at least one")
    return targets


def padded(values, spec, lengths=None, what="tokens"):
    """(ids [B, T], lengths [B] or None) for a forward pass or the analysis:
    rows of different lengths (a list of lists) are padded at their end with
    token 0, as a data file's are; `lengths` marks the real tokens of a
    rectangular array. None when every row is full, so that an unpadded batch
    runs without a mask, bit for bit as before."""
    if isinstance(lengths, str):  # TransformerLens's model(tokens, "loss"): its second argument is return_type
        raise TypeError(f"lengths: got the string {lengths!r}; the argument after the tokens is lengths (each "
                        f"sequence's real tokens), not return_type: write return_type={lengths!r}")
    if lengths is not None and _ragged(values):
        raise ValueError(f"{what}: lengths= marks the real tokens of a rectangular array, but these are sequences of "
                         "different lengths, which give their own lengths: drop lengths= (or pad the sequences into "
                         "an array)")
    if ragged(values, lengths):
        for i, row in enumerate(values):
            if len(row) == 0:
                raise ValueError(f"{what}[{i}]: an empty sequence; every sequence needs at least one token")
        rows = [_int_array(row, f"{what}[{i}]") for i, row in enumerate(values)]
        for i, row in enumerate(rows):
            if row.shape[0] != 1:
                raise ValueError(f"{what}[{i}]: expected a sequence of ids, got shape {list(row.shape[1:])}")
        lengths = [row.shape[1] for row in rows]
        array = np.zeros((len(rows), max(lengths)), dtype=np.int64)
        for i, row in enumerate(rows):
            array[i, :row.shape[1]] = row[0]
        values = array
    ids = tokens(values, spec, what)
    if lengths is None:
        return ids, None
    try:
        got = f"shape {list(np.shape(lengths))}"
    except ValueError:  # numpy refuses ragged nested lists
        got = "lists of different lengths"
    if got != f"shape {[ids.shape[0]]}":  # checked first: a scalar or a nested list is no list of lengths
        raise ValueError(f"lengths: expected one length per sequence ({ids.shape[0]}), got {got}")
    n = _int_array(lengths, "lengths")[0]
    if n.min() < 1 or n.max() > ids.shape[1]:
        value, where = _first_outside(n, 1, ids.shape[1] + 1)
        raise ValueError(f"lengths: {value} at {where} is not in [1, {ids.shape[1]}] (the tokens' positions)")
    if (n == ids.shape[1]).all():
        return ids, None
    ids = ids.copy()
    ids[np.arange(ids.shape[1]) >= n[:, None]] = 0  # what a data file pads with
    return ids, np.ascontiguousarray(n, dtype=np.int32)


def padded_targets(values, ids, lengths, spec, ragged=False):
    """Targets for `padded`'s ids, -1 at every padded position; by default the
    next real token. ragged: the tokens came as sequences of different
    lengths, so the targets are read per sequence (`target_rows`), each as
    long as its tokens. Else a [B, T] array of the tokens' shape, whose padded
    positions are ignored, or rows as ragged as `lengths`."""
    if values is None:
        out = next_token_targets(ids, spec)
        if lengths is not None:
            out[np.arange(ids.shape[1]) >= (lengths[:, None] - 1)] = -1
        return _with_a_target(out)
    if ragged or (lengths is not None and _ragged(values)):
        array = np.full(ids.shape, -1, dtype=np.int64)
        for i, row in enumerate(target_rows(values, lengths)):  # ragged tokens have lengths
            array[i, :row.size] = row
        values = array
    out = targets(values, ids, spec)
    if lengths is not None:
        out = out.copy()
        out[np.arange(ids.shape[1]) >= lengths[:, None]] = -1
        out = _with_a_target(out)
    return out


def target_rows(values, lengths):
    """Each sequence's targets, a 1-D int array exactly as long as its tokens
    (lengths[i]). Sequences of different lengths take their targets per
    sequence: rows of equal length must not be read as a padded array, whose
    padding would drop a target without a word."""
    if not isinstance(values, (list, tuple, np.ndarray)) or len(values) != len(lengths):
        got = f"{len(values)} sequences" if isinstance(values, (list, tuple, np.ndarray)) else repr(values)[:80]
        raise ValueError(f"targets: expected one list per sequence of tokens ({len(lengths)}), got {got}")
    out = []
    for i, (row, n) in enumerate(zip(values, lengths)):
        if not isinstance(row, (list, tuple, np.ndarray)) or getattr(row, "ndim", 1) == 0:
            raise ValueError(f"targets[{i}]: expected a list of class ids (-1: none), got {row!r:.80}")
        if len(row) != n:
            raise ValueError(f"targets[{i}]: {len(row)} targets for the {int(n)} tokens of tokens[{i}]; a sequence's "
                             "targets are as long as its tokens (-1 where a position has none), also when the "
                             "sequences have different lengths")
        array = _int_array(row, f"targets[{i}]")
        if array.shape[0] != 1:
            raise ValueError(f"targets[{i}]: expected a list of class ids (-1: none), got shape {list(array.shape)}")
        out.append(array[0])
    return out


def ragged(values, lengths=None):
    """Whether `padded` reads these tokens as sequences of different lengths
    (no `lengths`): their targets are then read per sequence."""
    return lengths is None and _ragged(values)


def _ragged(values):
    if isinstance(values, np.ndarray) or not isinstance(values, (list, tuple)) or not values:
        return False
    rows = [len(row) if isinstance(row, (list, tuple, np.ndarray)) else None for row in values]
    return None not in rows and len(set(rows)) > 1
