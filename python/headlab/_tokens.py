"""Checks the token ids and targets a call receives, in numpy (never element by
element in Python), so that bad input is a ValueError naming the value and what
fits, before any C++ runs."""
import numpy as np


def _int_array(values, what):
    try:
        array = np.asarray(values)
    except ValueError as e:  # ragged lists of lists
        raise ValueError(f"{what}: expected rows of equal length (an int array [batch, seq_len]): {e}") from None
    if array.dtype == object:
        raise ValueError(f"{what}: expected rows of equal length (an int array [batch, seq_len])")
    if array.size and array.dtype.kind not in "iu":
        raise ValueError(f"{what}: expected integer ids, got dtype {array.dtype}")
    if array.ndim == 1:
        array = array[np.newaxis, :]
    if array.ndim != 2:
        raise ValueError(f"{what}: expected shape [batch, seq_len], got {list(array.shape)}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{what}: expected at least one sequence of at least one token, got shape {list(array.shape)}")
    return array


def _first_outside(array, low, high):
    bad = np.argwhere((array < low) | (array >= high))[0]
    return int(array[tuple(bad)]), [int(i) for i in bad]


def tokens(values, spec):
    """[B, T] int32 ids within the model's vocabulary and length."""
    array = _int_array(values, "tokens")
    vocab, max_len = spec["vocab"], spec["max_seq_len"]
    if array.shape[1] > max_len:
        raise ValueError(f"tokens: {array.shape[1]} positions, but the model reads at most {max_len} (max_seq_len)")
    if array.min() < 0 or array.max() >= vocab:
        value, where = _first_outside(array, 0, vocab)
        raise ValueError(f"tokens: id {value} at {where} is outside the vocabulary [0, {vocab}) of this model")
    return np.ascontiguousarray(array, dtype=np.int32)


def targets(values, ids, spec):
    """[B, T] int32 class ids (-1: no target) of the tokens' shape."""
    array = _int_array(values, "targets")
    if array.shape != ids.shape:
        raise ValueError(f"targets: expected shape {list(ids.shape)} (the tokens'), got {list(array.shape)}")
    classes = spec["classes"]
    if array.min() < -1 or array.max() >= classes:
        value, where = _first_outside(array, -1, classes)
        raise ValueError(f"targets: class {value} at {where} is outside [0, {classes}) (or -1 for no target)")
    return np.ascontiguousarray(array, dtype=np.int32)


def next_token_targets(ids, spec):
    """Each position's target is the next token (the last has none)."""
    if spec["classes"] != spec["vocab"]:
        raise ValueError(f"this model predicts {spec['classes']} classes, not its {spec['vocab']} tokens: "
                         "give targets (an int array of the tokens' shape, -1 for no target)")
    out = np.full(ids.shape, -1, dtype=np.int32)
    out[:, :-1] = ids[:, 1:]
    return out
